//! Simulated devices: name, PCI bus id, memory size and use, device attributes, and
//! the sticky error that a fault leaves on a device. A device knows nothing of the
//! driver's contexts: its primary context is the driver's (`src/state.rs`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::errors::{CuResult, Res, INVALID_VALUE, OUT_OF_MEMORY, SUCCESS};
use crate::table::lock;
use crate::vaspace::AddressSpace;

/// One device, as the driver shows it.
pub struct Device {
    /// The ordinal programs use (its place in `CUDA_VISIBLE_DEVICES`).
    pub ordinal: usize,
    /// `cuDeviceGetName`'s answer.
    pub name: String,
    /// The PCI bus id (`CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`), from the physical index.
    pub pci_bus: i32,
    /// Total memory in bytes.
    pub total: usize,
    used: Mutex<usize>,
    /// The sticky error every context of this device returns after a fault (0: none).
    sticky: AtomicU32,
    /// Where its allocations take their addresses.
    pub vas: Mutex<AddressSpace>,
}

impl Device {
    /// Device `ordinal`, physically the `physical`-th simulated GPU.
    pub fn new(ordinal: usize, physical: usize, total: usize) -> Device {
        Device {
            ordinal,
            name: format!("cuda-sim simulated GPU {physical}"),
            pci_bus: 0x18 + physical as i32,
            total,
            used: Mutex::new(0),
            sticky: AtomicU32::new(SUCCESS),
            vas: Mutex::new(AddressSpace::reserve((total as u64).max(1 << 30) * 16)),
        }
    }

    /// Counts `bytes` more in use, or `CUDA_ERROR_OUT_OF_MEMORY` past the total.
    pub fn charge(&self, bytes: usize) -> Res<()> {
        let mut used = lock(&self.used);
        match used.checked_add(bytes) {
            Some(n) if n <= self.total => {
                *used = n;
                Ok(())
            }
            _ => Err(OUT_OF_MEMORY),
        }
    }

    /// Counts `bytes` as no longer in use.
    pub fn refund(&self, bytes: usize) {
        let mut used = lock(&self.used);
        *used = used.saturating_sub(bytes);
    }

    /// Bytes free.
    pub fn free_bytes(&self) -> usize {
        self.total - *lock(&self.used)
    }

    /// The device's sticky error, if a fault left one.
    pub fn sticky(&self) -> Res<()> {
        match self.sticky.load(Ordering::Acquire) {
            SUCCESS => Ok(()),
            code => Err(code),
        }
    }

    /// A fault: from now on every call on this device's contexts returns `code`
    /// (the first fault's code stays).
    pub fn poison(&self, code: CuResult) {
        let _ = self
            .sticky
            .compare_exchange(SUCCESS, code, Ordering::AcqRel, Ordering::Acquire);
    }

    /// `cuDeviceGetAttribute`: an H200-like device. Attributes the simulator has no
    /// value for read as 0; numbers past the last attribute CUDA 13 defines are
    /// `CUDA_ERROR_INVALID_VALUE`.
    pub fn attribute(&self, attr: i32) -> Res<i32> {
        let v = match attr {
            1 => 1024,          // MAX_THREADS_PER_BLOCK
            2 | 3 => 1024,      // MAX_BLOCK_DIM_X, _Y
            4 => 64,            // MAX_BLOCK_DIM_Z
            5 => i32::MAX,      // MAX_GRID_DIM_X
            6 | 7 => 65535,     // MAX_GRID_DIM_Y, _Z
            8 => 49152,         // MAX_SHARED_MEMORY_PER_BLOCK
            9 => 65536,         // TOTAL_CONSTANT_MEMORY
            10 => 32,           // WARP_SIZE
            11 => i32::MAX,     // MAX_PITCH
            12 => 65536,        // MAX_REGISTERS_PER_BLOCK
            13 => 1_980_000,    // CLOCK_RATE (kHz)
            14 => 512,          // TEXTURE_ALIGNMENT
            15 => 1,            // GPU_OVERLAP
            16 => 132,          // MULTIPROCESSOR_COUNT
            19 => 1,            // CAN_MAP_HOST_MEMORY
            31 => 1,            // CONCURRENT_KERNELS
            32 => 1,            // ECC_ENABLED
            33 => self.pci_bus, // PCI_BUS_ID
            36 => 2_619_000,    // MEMORY_CLOCK_RATE
            37 => 6144,         // GLOBAL_MEMORY_BUS_WIDTH
            38 => 60 << 20,     // L2_CACHE_SIZE
            39 => 2048,         // MAX_THREADS_PER_MULTIPROCESSOR
            40 => 3,            // ASYNC_ENGINE_COUNT
            41 => 1,            // UNIFIED_ADDRESSING
            51 => 32,           // TEXTURE_PITCH_ALIGNMENT
            75 => 9,            // COMPUTE_CAPABILITY_MAJOR
            76 => 0,            // COMPUTE_CAPABILITY_MINOR
            81 => 228 << 10,    // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
            82 => 65536,        // MAX_REGISTERS_PER_MULTIPROCESSOR
            83 => 1,            // MANAGED_MEMORY
            86 => 1,            // HOST_NATIVE_ATOMIC_SUPPORTED
            89 => 1,            // CONCURRENT_MANAGED_ACCESS
            97 => 227 << 10,    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
            115 => 1,           // MEMORY_POOLS_SUPPORTED
            0 | 200.. => return Err(INVALID_VALUE),
            _ => 0,
        };
        Ok(v)
    }
}
