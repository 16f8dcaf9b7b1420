//! [`GlobalArray<T>`]: an array distributed over the units of a team
//! (DASH's `dash::Array`, lamellar's distributed arrays), on one team
//! allocation.
//!
//! The elements are dealt out in blocks: block `k` (elements
//! `k*b .. (k+1)*b`) goes to unit `k mod n`, after that unit's earlier
//! blocks. [`Distribution::Block`] is one block per unit (`b = ⌈len/n⌉`);
//! [`Distribution::BlockCyclic`] takes `b` from the caller. A unit's
//! elements are contiguous in its part of the allocation: its local view
//! is a slice, and an element anywhere is a global pointer away.

use crate::error::{arg, Error, Result};
use crate::gptr::{GlobalPtr, Gptr};
use crate::runtime::Pgas;
use crate::team::Team;
use hmpi_core::datatype::Equivalence;

/// How a [`GlobalArray`] deals its elements out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// One contiguous block per unit, `⌈len/n⌉` elements (the last units'
    /// blocks may be shorter or empty).
    Block,
    /// Blocks of this many elements, dealt out round-robin.
    BlockCyclic(usize),
}

/// An array of `len` elements of `T` over the units of a team.
///
/// Remote access is through [`GlobalArray::get`], [`GlobalArray::put`]
/// and their range forms (checked, complete on return); the local part is
/// a slice ([`GlobalArray::local`]), which is `unsafe` to borrow because
/// other units can write it: the program orders the two, typically with
/// [`GlobalArray::barrier`] between phases.
#[derive(Debug)]
pub struct GlobalArray<'p, T> {
    pg: &'p Pgas,
    team: Team,
    /// Unit 0's first element.
    base: Gptr,
    len: usize,
    dist: Distribution,
    /// Elements per block.
    block: usize,
    /// Elements of this unit.
    local_len: usize,
    /// This unit's first element here.
    local: *mut T,
    freed: bool,
}

// SAFETY: the raw pointer is to this unit's part of a team allocation in
// the node heap, which lives as long as the array; access to it is
// `unsafe` and the caller's to order.
unsafe impl<T: Send> Send for GlobalArray<'_, T> {}
// SAFETY: as for `Send`; the methods on `&self` go through the context,
// which is `Sync`.
unsafe impl<T: Sync> Sync for GlobalArray<'_, T> {}

/// The elements of unit `u` of `n` in blocks of `b` for `len` elements.
fn local_len_of(len: usize, n: usize, b: usize, u: usize) -> usize {
    let nblocks = len.div_ceil(b);
    if u >= nblocks {
        return 0;
    }
    let count = (nblocks - u).div_ceil(n);
    let last = nblocks - 1;
    let short = if last % n == u { nblocks * b - len } else { 0 };
    count * b - short
}

impl<'p, T: Equivalence> GlobalArray<'p, T> {
    /// An array of `len` zeroed elements over `team` (collective over
    /// it; every unit passes the same arguments).
    pub fn new(pg: &'p Pgas, team: &Team, len: usize, dist: Distribution) -> Result<Self> {
        let size = std::mem::size_of::<T>();
        if size == 0 {
            return Err(arg("a global array of a zero-sized type"));
        }
        let n = team.size() as usize;
        let block = match dist {
            Distribution::Block => len.div_ceil(n).max(1),
            Distribution::BlockCyclic(0) => {
                return Err(arg("a block-cyclic distribution with blocks of 0 elements"))
            }
            Distribution::BlockCyclic(b) => b,
        };
        let cap = (0..n)
            .map(|u| local_len_of(len, n, block, u))
            .max()
            .unwrap_or(0);
        let bytes = (cap as u64)
            .checked_mul(size as u64)
            .ok_or_else(|| arg(format!("{len} elements of {size} bytes overflow")))?;
        let base = pg.team_memalloc_aligned(team, bytes)?;
        let me = team.myid();
        let local_len = local_len_of(len, n, block, me as usize);
        let mine = base.at_unit(team.units()[me as usize]);
        let local = pg.local_addr(mine, 0)?.cast::<T>();
        Ok(GlobalArray {
            pg,
            team: team.clone(),
            base,
            len,
            dist,
            block,
            local_len,
            local,
            freed: false,
        })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The distribution.
    pub fn distribution(&self) -> Distribution {
        self.dist
    }

    /// Elements per block.
    pub fn block_size(&self) -> usize {
        self.block
    }

    /// The team.
    pub fn team(&self) -> &Team {
        &self.team
    }

    /// The number of this unit's elements.
    pub fn local_len(&self) -> usize {
        self.local_len
    }

    /// The number of team unit `unit`'s elements.
    pub fn local_len_of(&self, unit: u32) -> usize {
        local_len_of(
            self.len,
            self.team.size() as usize,
            self.block,
            unit as usize,
        )
    }

    /// The owner of element `i` (team-relative) and its index there.
    pub fn owner(&self, i: usize) -> Result<(u32, usize)> {
        if i >= self.len {
            return Err(arg(format!(
                "index {i} of a global array of {} elements",
                self.len
            )));
        }
        let n = self.team.size() as usize;
        let k = i / self.block;
        Ok(((k % n) as u32, (k / n) * self.block + i % self.block))
    }

    /// The global index of this unit's local element `l`.
    pub fn local_to_global(&self, l: usize) -> Result<usize> {
        if l >= self.local_len {
            return Err(arg(format!(
                "local index {l} of a unit with {} elements",
                self.local_len
            )));
        }
        Ok(self.global_of(self.team.myid() as usize, l))
    }

    fn global_of(&self, unit: usize, l: usize) -> usize {
        let n = self.team.size() as usize;
        (l / self.block * n + unit) * self.block + l % self.block
    }

    /// A global pointer to element `i`.
    pub fn gptr(&self, i: usize) -> Result<GlobalPtr<T>> {
        let (u, l) = self.owner(i)?;
        let g = GlobalPtr::<T>::from_raw(self.base.at_unit(self.team.units()[u as usize]));
        g.add(l)
    }

    /// Element `i` (wherever it is).
    pub fn get(&self, i: usize) -> Result<T> {
        self.pg.get_value(self.gptr(i)?)
    }

    /// Sets element `i`.
    pub fn put(&self, i: usize, value: T) -> Result<()> {
        self.pg.put_value(self.gptr(i)?, value)
    }

    /// Calls `f` with (first index, run length) for each run of
    /// `start..start + n` that lies in one block.
    fn runs(
        &self,
        start: usize,
        n: usize,
        mut f: impl FnMut(GlobalPtr<T>, usize, usize) -> Result<()>,
    ) -> Result<()> {
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                arg(format!(
                    "elements {start}..{} of a global array of {} elements",
                    start as u128 + n as u128,
                    self.len
                ))
            })?;
        let mut i = start;
        while i < end {
            let run = (self.block - i % self.block).min(end - i);
            f(self.gptr(i)?, i - start, run)?;
            i += run;
        }
        Ok(())
    }

    /// Elements `start..start + out.len()` into `out`.
    pub fn get_range(&self, start: usize, out: &mut [T]) -> Result<()> {
        let n = out.len();
        self.runs(start, n, |g, at, run| {
            self.pg.get(g, &mut out[at..at + run])
        })
    }

    /// `data` into elements `start..start + data.len()`.
    pub fn put_range(&self, start: usize, data: &[T]) -> Result<()> {
        self.runs(start, data.len(), |g, at, run| {
            self.pg.put(g, &data[at..at + run])
        })
    }

    /// This unit's elements, copied.
    pub fn local_copy(&self) -> Vec<T> {
        // SAFETY: a copy of the local part; other units' writes to it are
        // ordered by the program (as for any read of it).
        unsafe { self.local() }.to_vec()
    }

    /// This unit's elements (the local view).
    ///
    /// # Safety
    /// While the slice lives no unit writes this unit's part (puts,
    /// atomics) — e.g. it lives between two barriers of a phase in which
    /// nobody writes the array.
    pub unsafe fn local(&self) -> &[T] {
        if self.local_len == 0 {
            return &[];
        }
        // SAFETY: `local_len` elements of this unit's part, zeroed at
        // allocation (valid `T`s: `Equivalence` types are valid for every
        // byte pattern); the caller's guarantee covers aliasing.
        unsafe { std::slice::from_raw_parts(self.local, self.local_len) }
    }

    /// This unit's elements, for writing.
    ///
    /// # Safety
    /// While the slice lives no other unit reads or writes this unit's
    /// part, and no other reference to it exists here.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn local_mut(&self) -> &mut [T] {
        if self.local_len == 0 {
            return &mut [];
        }
        // SAFETY: as in `local`; the caller's guarantee makes it unique.
        unsafe { std::slice::from_raw_parts_mut(self.local, self.local_len) }
    }

    /// The local elements in order (see [`GlobalArray::local`]).
    ///
    /// # Safety
    /// As for [`GlobalArray::local`].
    pub unsafe fn iter_local(&self) -> impl Iterator<Item = (usize, &T)> + '_ {
        let me = self.team.myid() as usize;
        // SAFETY: the caller's guarantee.
        unsafe { self.local() }
            .iter()
            .enumerate()
            .map(move |(l, v)| (self.global_of(me, l), v))
    }

    /// Calls `f(global index, element)` for every local element, on
    /// `threads` threads (each a contiguous share of the local part).
    ///
    /// # Safety
    /// As for [`GlobalArray::local_mut`], for the duration of the call.
    pub unsafe fn for_each_local<F>(&self, threads: usize, f: F)
    where
        F: Fn(usize, &mut T) + Sync,
        T: Send + Sync,
    {
        let me = self.team.myid() as usize;
        // SAFETY: the caller's guarantee.
        let local = unsafe { self.local_mut() };
        let threads = threads.clamp(1, local.len().max(1));
        let chunk = local.len().div_ceil(threads).max(1);
        let f = &f;
        std::thread::scope(|s| {
            for (c, part) in local.chunks_mut(chunk).enumerate() {
                s.spawn(move || {
                    for (j, v) in part.iter_mut().enumerate() {
                        f(self.global_of(me, c * chunk + j), v);
                    }
                });
            }
        });
    }

    /// A barrier of the array's team.
    pub fn barrier(&self) -> Result<()> {
        self.team.barrier()
    }

    /// Frees the array (collective over its team).
    pub fn free(mut self) -> Result<()> {
        self.freed = true;
        self.pg.team_memfree(self.base)
    }
}

impl<T> Drop for GlobalArray<'_, T> {
    fn drop(&mut self) {
        if !self.freed {
            // Errors cannot be returned from a drop; `free` reports them.
            let r: std::result::Result<(), Error> = self.pg.team_memfree(self.base);
            drop(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::local_len_of;

    #[test]
    fn local_lengths_add_up_and_blocks_round_robin() {
        for len in 0..40 {
            for n in 1..6 {
                for b in 1..9 {
                    let total: usize = (0..n).map(|u| local_len_of(len, n, b, u)).sum();
                    assert_eq!(total, len, "len {len} n {n} b {b}");
                    let mut counts = vec![0usize; n];
                    for i in 0..len {
                        counts[(i / b) % n] += 1;
                    }
                    for (u, &c) in counts.iter().enumerate() {
                        assert_eq!(local_len_of(len, n, b, u), c);
                    }
                }
            }
        }
    }
}
