//! FFT2D (the papers' case study, thesis §4.7.3 and §5.3): a distributed
//! two-dimensional FFT whose transposes move blocks by ownership, checked
//! against a serial FFT.
//!
//! ```text
//! hmpirun -n P target/release/examples/fft2d [--n N] [--reps R]
//! ```
//!
//! The N × N complex matrix is split by rows: each of the P ranks holds
//! B = N / P rows (N a power of two, a multiple of P). A 2D FFT is
//! 1D FFTs along the rows, a transpose, 1D FFTs along the rows again and a
//! transpose back. The transpose is an all-to-all of B × B blocks: block j
//! of rank i becomes block i of rank j, transposed. Three ways, measured
//! in the same run:
//!
//! * `copy`: pack each block into a send buffer, two-sided immediate sends
//!   and receives (the engine copies), unpack with the transpose;
//! * `opi`: pack each block into a pooled buffer and give it
//!   ([`opi::collective::all_to_all_give`]); unpack what was taken and
//!   free it — the blocks themselves move, nothing is copied between;
//! * `fused`: no buffers at all (thesis §5.3.1): every rank publishes its
//!   matrix's address in a node-shared array once per transpose, a
//!   counter per rank says when it is readable and when every reader is
//!   done, and each rank reads its blocks straight out of the others'
//!   matrices, transposing as it goes (the fused pack + unpack loop).
//!
//! Every rank checks its rows of every variant's result against a serial
//! 2D FFT of the whole matrix (and the 1D FFT against a direct DFT).

use hmpi_core::prelude::*;
use opi::collective::all_to_all_give;
use opi::fusion::{Counter, NodeArray};
use opi::prelude::*;
use shmheap::ShmHeap;
use std::f64::consts::PI;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// A complex number; transferable (its values are their bytes).
#[derive(Transferable, Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct C64 {
    re: f64,
    im: f64,
}

// SAFETY: two f64s, `#[repr(C)]`: no padding, every bit pattern valid,
// no pointers.
unsafe impl Equivalence for C64 {}

impl C64 {
    fn add(self, o: C64) -> C64 {
        C64 {
            re: self.re + o.re,
            im: self.im + o.im,
        }
    }
    fn sub(self, o: C64) -> C64 {
        C64 {
            re: self.re - o.re,
            im: self.im - o.im,
        }
    }
    fn mul(self, o: C64) -> C64 {
        C64 {
            re: self.re * o.re - self.im * o.im,
            im: self.re * o.im + self.im * o.re,
        }
    }
    fn cis(a: f64) -> C64 {
        C64 {
            re: a.cos(),
            im: a.sin(),
        }
    }
    fn dist(self, o: C64) -> f64 {
        (self.re - o.re).hypot(self.im - o.im)
    }
}

/// In-place iterative radix-2 FFT (forward, no scaling); `x.len()` is a
/// power of two; `tw[k] = e^{-2πik/n}` for `k < n/2`.
fn fft(x: &mut [C64], tw: &[C64]) {
    let n = x.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            x.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let step = n / len;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let w = tw[k * step];
                let a = x[start + k];
                let b = x[start + k + len / 2].mul(w);
                x[start + k] = a.add(b);
                x[start + k + len / 2] = a.sub(b);
            }
        }
        len <<= 1;
    }
}

fn twiddles(n: usize) -> Vec<C64> {
    (0..n / 2)
        .map(|k| C64::cis(-2.0 * PI * k as f64 / n as f64))
        .collect()
}

/// The input matrix's element (r, c).
fn input(r: usize, c: usize) -> C64 {
    C64 {
        re: (r as f64 * 0.37 + c as f64 * 0.11).sin() + (c % 7) as f64 * 0.1,
        im: ((r * c) as f64 * 0.013).cos() - (r % 5) as f64 * 0.2,
    }
}

/// The serial 2D FFT of the whole N × N input (row-major).
fn serial_fft2d(n: usize, tw: &[C64]) -> Vec<C64> {
    let mut m: Vec<C64> = (0..n * n).map(|i| input(i / n, i % n)).collect();
    for row in m.chunks_mut(n) {
        fft(row, tw);
    }
    let mut col = vec![C64::default(); n];
    for c in 0..n {
        for r in 0..n {
            col[r] = m[r * n + c];
        }
        fft(&mut col, tw);
        for r in 0..n {
            m[r * n + c] = col[r];
        }
    }
    m
}

/// Checks the FFT against a direct DFT.
fn check_fft() -> Result<()> {
    let n = 64;
    let tw = twiddles(n);
    let x: Vec<C64> = (0..n).map(|i| input(3, i)).collect();
    let mut y = x.clone();
    fft(&mut y, &tw);
    for (k, yk) in y.iter().enumerate() {
        let d = (0..n).fold(C64::default(), |acc, j| {
            acc.add(x[j].mul(C64::cis(-2.0 * PI * (j * k) as f64 / n as f64)))
        });
        if d.dist(*yk) > 1e-9 {
            return Err(Error::Internal(format!("FFT differs from the DFT at {k}")));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Copy,
    Opi,
    Fused,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Copy => "copy",
            Variant::Opi => "opi",
            Variant::Fused => "fused",
        }
    }
}

/// One rank's part: its rows, and what the transposes need.
struct Rank<'a> {
    world: &'a SimpleCommunicator,
    n: usize,
    b: usize,
    p: usize,
    me: usize,
    tw: Vec<C64>,
    /// The fused variant's node-shared (matrix address, counter) per rank.
    shared: NodeArray<(AtomicU64, Counter)>,
    /// Transposes done by the fused variant (its counter's epoch).
    fused_rounds: u64,
}

impl Rank<'_> {
    /// Packs block `j` (columns j·B..) of `m` row by row.
    fn pack(&self, m: &[C64], j: usize, out: &mut OpiBuf<C64>) {
        for x in 0..self.b {
            out.extend_from_slice(&m[x * self.n + j * self.b..][..self.b]);
        }
    }

    /// Unpacks a block from rank `i` into `m`, transposed.
    fn unpack(&self, blk: &[C64], i: usize, m: &mut [C64]) {
        let (n, b) = (self.n, self.b);
        for x in 0..b {
            for y in 0..b {
                m[y * n + i * b + x] = blk[x * b + y];
            }
        }
    }

    fn transpose_copy(&self, m: &mut [C64]) -> Result<()> {
        let (b, p) = (self.b, self.p);
        let mut send = vec![C64::default(); p * b * b];
        for j in 0..p {
            for x in 0..b {
                send[(j * b + x) * b..][..b].copy_from_slice(&m[x * self.n + j * b..][..b]);
            }
        }
        let mut recv = vec![C64::default(); p * b * b];
        hmpi_core::request::scope(|s| -> Result<()> {
            let mut reqs = Vec::new();
            for (i, chunk) in recv.chunks_mut(b * b).enumerate() {
                reqs.push(
                    self.world
                        .process_at_rank(i as i32)
                        .immediate_receive_into_with_tag(s, chunk, 9)?,
                );
            }
            for (j, chunk) in send.chunks(b * b).enumerate() {
                reqs.push(
                    self.world
                        .process_at_rank(j as i32)
                        .immediate_send_with_tag(s, chunk, 9)?,
                );
            }
            for r in reqs {
                r.wait()?;
            }
            Ok(())
        })?;
        for (i, blk) in recv.chunks(b * b).enumerate() {
            self.unpack(blk, i, m);
        }
        Ok(())
    }

    fn transpose_opi(&self, m: &mut [C64]) -> Result<()> {
        let mut out = Vec::with_capacity(self.p);
        for j in 0..self.p {
            let mut buf = OpiBuf::with_capacity(self.b * self.b)?;
            self.pack(m, j, &mut buf);
            out.push(buf);
        }
        let got = all_to_all_give(self.world, out)?;
        for (i, blk) in got.into_iter().enumerate() {
            self.unpack(&blk, i, m);
            // `blk` is freed here: back to this rank's pool.
        }
        Ok(())
    }

    /// The fused transpose from `src` into `dst` (out of place: peers read
    /// `src` meanwhile).
    fn transpose_fused(&mut self, src: &[C64], dst: &mut [C64]) {
        let (n, b, me) = (self.n, self.b, self.me);
        let t = self.fused_rounds;
        self.fused_rounds += 1;
        let mine = &self.shared[me];
        // Relaxed: published by the counter's add (AcqRel) right after.
        mine.0.store(src.as_ptr() as u64, Ordering::Relaxed);
        mine.1.add(1); // 2t + 1: `src` is readable
        for s in 0..self.p {
            let (addr, counter) = &self.shared[s];
            counter.wait_until_at_least(2 * t + 1);
            // Relaxed: ordered by the counter wait (Acquire) above.
            let other = addr.load(Ordering::Relaxed) as *const C64;
            for x in 0..b {
                // SAFETY: rank s published its live matrix of n·b elements
                // (in the node heap, the global allocator) before its
                // counter reached 2t+1, which we acquired, and does not
                // write or free it before every rank's counter reaches
                // 2t+2 (below). Row x, columns me·b.. are inside it.
                let row = unsafe { std::slice::from_raw_parts(other.add(x * n + me * b), b) };
                for (y, v) in row.iter().enumerate() {
                    dst[y * n + s * b + x] = *v;
                }
            }
        }
        mine.1.add(1); // 2t + 2: done reading
        for (_, counter) in self.shared.iter() {
            counter.wait_until_at_least(2 * t + 2);
        }
    }

    /// 1D FFTs of every local row.
    fn rows_fft(&self, m: &mut [C64]) {
        for row in m.chunks_mut(self.n) {
            fft(row, &self.tw);
        }
    }

    /// One 2D FFT of the input with `v`: the result (local rows) and the
    /// seconds spent in the two transposes.
    fn fft2d(&mut self, v: Variant) -> Result<(Vec<C64>, f64)> {
        let (n, b, me) = (self.n, self.b, self.me);
        let mut m: Vec<C64> = (0..b * n).map(|i| input(me * b + i / n, i % n)).collect();
        let mut spare = vec![C64::default(); b * n];
        let mut t_comm = 0.0;
        self.rows_fft(&mut m);
        for pass in 0..2 {
            self.world.barrier()?;
            let t0 = Instant::now();
            match v {
                Variant::Copy => self.transpose_copy(&mut m)?,
                Variant::Opi => self.transpose_opi(&mut m)?,
                Variant::Fused => {
                    self.transpose_fused(&m, &mut spare);
                    std::mem::swap(&mut m, &mut spare);
                }
            }
            t_comm += t0.elapsed().as_secs_f64();
            if pass == 0 {
                self.rows_fft(&mut m);
            }
        }
        Ok((m, t_comm))
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("fft2d: {e}");
        std::process::exit(1);
    }
}

fn arg(name: &str, default: usize) -> Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Internal(format!("{name} needs a number"))),
    }
}

fn run() -> Result<()> {
    let universe = hmpi_core::init()?;
    let world = universe.world();
    let (p, me) = (world.size() as usize, world.rank() as usize);
    let n = arg("--n", 512)?;
    let reps = arg("--reps", 5)?.max(1);
    if !n.is_power_of_two() || n % p != 0 || n < p {
        return Err(Error::Comm {
            reason: format!("--n {n}: must be a power of two and a multiple of the {p} ranks"),
        });
    }
    check_fft()?;
    let shared = NodeArray::new(&world, 0, p, |_| (AtomicU64::new(0), Counter::new()))?;
    let mut rank = Rank {
        world: &world,
        n,
        b: n / p,
        p,
        me,
        tw: twiddles(n),
        shared,
        fused_rounds: 0,
    };
    let reference = serial_fft2d(n, &rank.tw);
    let mine = &reference[me * rank.b * n..][..rank.b * n];
    let scale = reference
        .iter()
        .map(|c| c.re.abs().max(c.im.abs()))
        .fold(1.0, f64::max);
    if me == 0 {
        println!("FFT2D {n} x {n} on {p} ranks, {reps} repetitions");
        println!(
            "{:>8} {:>14} {:>14} {:>12}",
            "variant", "transpose ms", "total ms", "max error"
        );
    }
    let mut results = Vec::new();
    for v in [Variant::Copy, Variant::Opi, Variant::Fused] {
        let mut comm = Vec::new();
        let mut total = Vec::new();
        let mut err: f64 = 0.0;
        for _ in 0..reps {
            world.barrier()?;
            let t0 = Instant::now();
            let (m, t) = rank.fft2d(v)?;
            total.push(t0.elapsed().as_secs_f64());
            comm.push(t);
            err = m
                .iter()
                .zip(mine)
                .map(|(a, b)| a.dist(*b) / scale)
                .fold(err, f64::max);
        }
        if err > 1e-10 {
            return Err(Error::Internal(format!(
                "rank {me}: the {} variant differs from the serial FFT by {err:e}",
                v.name()
            )));
        }
        comm.sort_by(f64::total_cmp);
        total.sort_by(f64::total_cmp);
        let (c, t) = (comm[comm.len() / 2], total[total.len() / 2]);
        if me == 0 {
            println!(
                "{:>8} {:>14.3} {:>14.3} {:>12.1e}",
                v.name(),
                c * 1e3,
                t * 1e3,
                err
            );
        }
        results.push((v, c));
    }
    if me == 0 {
        let base = results[0].1;
        for (v, c) in &results[1..] {
            println!(
                "transpose speedup of {} over copy: {:.2}x",
                v.name(),
                base / c
            );
        }
        println!("every rank's rows match the serial FFT");
    }
    universe.finalize()
}
