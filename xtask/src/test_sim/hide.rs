//! Hiding entry points of the simulator from the loader (`--hide`), so that the
//! library's fallbacks for drivers without them (an optional entry point of
//! `cuda-sys`, such as `cuMemcpyBatchAsync`) run in the simulated suite, where the
//! simulator, like the H200's driver, has them all.
//!
//! A copy of the simulator library gets each hidden name overwritten in its dynamic
//! string table (`.dynstr`), same length, first letter `X`: `dlsym` compares the
//! name it is asked for with that string, so it no longer finds the symbol, and
//! nothing else of the library changes.

use crate::Result;

/// Reads a little-endian field of `N` bytes at `at`.
fn field<const N: usize>(elf: &[u8], at: usize) -> Result<[u8; N]> {
    elf.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("ELF file cut short at byte {at}").into())
}

fn u16_at(elf: &[u8], at: usize) -> Result<usize> {
    Ok(u16::from_le_bytes(field(elf, at)?) as usize)
}

fn u32_at(elf: &[u8], at: usize) -> Result<usize> {
    Ok(u32::from_le_bytes(field(elf, at)?) as usize)
}

fn u64_at(elf: &[u8], at: usize) -> Result<usize> {
    Ok(u64::from_le_bytes(field(elf, at)?) as usize)
}

/// The byte range of section `wanted` of a 64-bit little-endian ELF file.
fn section(elf: &[u8], wanted: &str) -> Result<std::ops::Range<usize>> {
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let (shoff, shentsize) = (u64_at(elf, 0x28)?, u16_at(elf, 0x3a)?);
    let (shnum, shstrndx) = (u16_at(elf, 0x3c)?, u16_at(elf, 0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let range = |i: usize| -> Result<std::ops::Range<usize>> {
        let (off, size) = (
            u64_at(elf, header(i) + 0x18)?,
            u64_at(elf, header(i) + 0x20)?,
        );
        Ok(off..off + size)
    };
    let names = range(shstrndx)?;
    for i in 0..shnum {
        let at = names.start + u32_at(elf, header(i))?;
        let name = elf.get(at..at + wanted.len() + 1);
        if name.is_some_and(|n| n[..wanted.len()] == *wanted.as_bytes() && n[wanted.len()] == 0) {
            let r = range(i)?;
            return match elf.get(r.clone()) {
                Some(_) => Ok(r),
                None => Err(format!("section {wanted} lies past the end of the file").into()),
            };
        }
    }
    Err(format!("no {wanted} section").into())
}

/// Overwrites every name of `names` in `elf`'s `.dynstr` (see the module docs). A
/// name the table does not hold is an error: hiding it would hide nothing.
pub fn hide(elf: &mut [u8], names: &[String]) -> Result<()> {
    let table = section(elf, ".dynstr")?;
    for name in names {
        let needle = format!("\0{name}\0");
        let strings = &mut elf[table.clone()];
        let Some(at) = strings
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
        else {
            return Err(format!("the simulator exports no `{name}` to hide").into());
        };
        strings[at + 1] = b'X';
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test executable's own dynamic string table names the C library's calls.
    fn own_elf() -> Vec<u8> {
        std::fs::read(std::env::current_exe().unwrap()).unwrap()
    }

    fn dynstr_holds(elf: &[u8], name: &str) -> bool {
        let r = section(elf, ".dynstr").unwrap();
        let needle = format!("\0{name}\0");
        elf[r].windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[test]
    fn a_hidden_name_leaves_the_dynamic_string_table_and_nothing_else_changes() {
        let before = own_elf();
        assert!(dynstr_holds(&before, "malloc"));
        let mut after = before.clone();
        hide(&mut after, &["malloc".into()]).unwrap();
        assert!(!dynstr_holds(&after, "malloc"));
        assert!(dynstr_holds(&after, "Xalloc"));
        assert_eq!(after.len(), before.len());
        let changed: Vec<usize> = (0..before.len())
            .filter(|&i| before[i] != after[i])
            .collect();
        assert_eq!(changed.len(), 1, "one byte changes");
    }

    #[test]
    fn a_name_not_exported_or_a_file_not_elf_is_an_error() {
        let mut elf = own_elf();
        let e = hide(&mut elf, &["cuNoSuchEntryPoint".into()]).unwrap_err();
        assert!(
            e.to_string().contains("exports no `cuNoSuchEntryPoint`"),
            "{e}"
        );
        let e = hide(&mut b"#!/bin/sh\n".to_vec(), &["malloc".into()]).unwrap_err();
        assert!(e.to_string().contains("not a 64-bit"), "{e}");
        let e = hide(&mut elf[..64].to_vec(), &["malloc".into()]).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
    }
}
