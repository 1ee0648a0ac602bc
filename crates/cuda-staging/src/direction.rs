//! [`Direction`]: which way a transfer moves, and [`PerDirection`], one value for
//! each way.

/// The direction of a transfer, for per-direction routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Host to device (`upload`).
    HostToDevice,
    /// Device to host (`download`).
    DeviceToHost,
}

/// One value for uploads and one for downloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PerDirection<T> {
    /// For [`Direction::HostToDevice`].
    pub upload: T,
    /// For [`Direction::DeviceToHost`].
    pub download: T,
}

impl<T: Copy> PerDirection<T> {
    /// The same value for both directions.
    pub const fn both(v: T) -> PerDirection<T> {
        PerDirection {
            upload: v,
            download: v,
        }
    }

    /// The value for `direction`.
    pub fn get(&self, direction: Direction) -> T {
        match direction {
            Direction::HostToDevice => self.upload,
            Direction::DeviceToHost => self.download,
        }
    }

    /// Sets the value for `direction`.
    pub fn set(&mut self, direction: Direction, v: T) {
        match direction {
            Direction::HostToDevice => self.upload = v,
            Direction::DeviceToHost => self.download = v,
        }
    }

    /// `self` with the value for `direction` replaced by `v`.
    pub fn with(mut self, direction: Direction, v: T) -> PerDirection<T> {
        self.set(direction, v);
        self
    }
}
