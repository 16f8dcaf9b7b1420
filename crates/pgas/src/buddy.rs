//! A buddy allocator over offsets of a unit's local pool (segment 0): the
//! non-collective allocations of the thesis (`dart_memalloc`). It hands
//! out offsets only; the memory is the pool's window in the node heap.

use crate::error::{arg, Result};
use std::collections::{BTreeSet, HashMap};

/// The smallest block: one cache line.
pub(crate) const MIN_BLOCK: u64 = 64;

/// Free blocks per order (order `k`: `MIN_BLOCK << k` bytes), and the
/// order of every block handed out.
#[derive(Debug)]
pub(crate) struct Buddy {
    /// `free[k]`: offsets of the free blocks of order `k`.
    free: Vec<BTreeSet<u64>>,
    /// Offset → order of the blocks in use.
    used: HashMap<u64, u32>,
}

impl Buddy {
    /// An allocator over `size` bytes (a power of two, at least
    /// `2 * MIN_BLOCK`); the block at offset 0 is reserved so that no
    /// allocation is the null global pointer.
    pub(crate) fn new(size: u64) -> Result<Buddy> {
        if !size.is_power_of_two() || size < 2 * MIN_BLOCK {
            return Err(arg(format!(
                "a local pool of {size} bytes: it must be a power of two of at least {} bytes",
                2 * MIN_BLOCK
            )));
        }
        let top = (size / MIN_BLOCK).trailing_zeros();
        let mut b = Buddy {
            free: vec![BTreeSet::new(); top as usize + 1],
            used: HashMap::new(),
        };
        b.free[top as usize].insert(0);
        let null = b.alloc(1)?;
        debug_assert_eq!(null, 0);
        Ok(b)
    }

    fn order_of(bytes: u64) -> Option<u32> {
        let blocks = bytes
            .max(1)
            .div_ceil(MIN_BLOCK)
            .checked_next_power_of_two()?;
        Some(blocks.trailing_zeros())
    }

    /// The offset of a free block of at least `bytes` bytes, aligned to
    /// its size (so to `MIN_BLOCK` at least).
    pub(crate) fn alloc(&mut self, bytes: u64) -> Result<u64> {
        let exhausted = || {
            arg(format!(
                "the local pool has no free block of {bytes} bytes (set HMPI_PGAS_POOL to a \
                 larger power of two)"
            ))
        };
        let want = Buddy::order_of(bytes).ok_or_else(exhausted)?;
        let have = (want as usize..self.free.len())
            .find(|&k| !self.free[k].is_empty())
            .ok_or_else(exhausted)?;
        let Some(off) = self.free[have].pop_first() else {
            return Err(exhausted());
        };
        // Split down to the order wanted: the upper halves stay free.
        for k in (want as usize..have).rev() {
            self.free[k].insert(off + (MIN_BLOCK << k));
        }
        self.used.insert(off, want);
        Ok(off)
    }

    /// Returns the block at `offset`, merging it with free buddies.
    pub(crate) fn free(&mut self, offset: u64) -> Result<()> {
        let Some(mut k) = self.used.remove(&offset) else {
            return Err(arg(format!(
                "offset {offset:#x} of the local pool is not an allocation in use (freed \
                 twice, or not the start of a block)"
            )));
        };
        let mut off = offset;
        while (k as usize) + 1 < self.free.len() {
            let buddy = off ^ (MIN_BLOCK << k);
            if !self.free[k as usize].remove(&buddy) {
                break;
            }
            off = off.min(buddy);
            k += 1;
        }
        self.free[k as usize].insert(off);
        Ok(())
    }

    /// The size of the block in use at `offset`.
    #[cfg(test)]
    pub(crate) fn block_size(&self, offset: u64) -> Option<u64> {
        self.used.get(&offset).map(|&k| MIN_BLOCK << k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_disjoint_aligned_and_merge_back() {
        let mut b = Buddy::new(1 << 16).unwrap();
        let sizes = [1u64, 64, 65, 200, 1000, 4096, 3, 8192, 64, 500];
        let mut got: Vec<(u64, u64)> = Vec::new();
        for &s in &sizes {
            let o = b.alloc(s).unwrap();
            let len = b.block_size(o).unwrap();
            assert!(len >= s && o % len == 0 && o != 0);
            for &(p, l) in &got {
                assert!(o + len <= p || p + l <= o, "overlap");
            }
            got.push((o, len));
        }
        for &(o, _) in &got {
            b.free(o).unwrap();
        }
        assert!(b.free(got[0].0).is_err());
        // Everything merged back: the largest block left is half the pool.
        assert_eq!(b.alloc(1 << 15).unwrap(), 1 << 15);
        assert!(b.alloc(1 << 15).is_err());
        assert!(b.alloc(u64::MAX).is_err());
        assert!(Buddy::new(1000).is_err());
    }
}
