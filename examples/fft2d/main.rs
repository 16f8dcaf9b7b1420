//! FFT2D (the papers' case study, thesis §4.7.3 and §5.3), the demo that
//! `scripts/demo` runs: a distributed two-dimensional FFT whose transposes
//! move the data four ways, each checked against a serial FFT, with a
//! table of what each cost and a PNG plot of it.
//!
//! ```text
//! hmpirun -n P target/debug/examples/fft2d [--n N] [--reps R] [--png FILE] [--extra FILE]
//! ```
//!
//! The N × N complex matrix is split by rows: each of the P ranks holds
//! B = N / P rows (N a power of two, a multiple of P). A 2D FFT is 1D FFTs
//! along the rows, a transpose, 1D FFTs along the rows again and a
//! transpose back. The transpose is an all-to-all of B × B blocks: block j
//! of rank i becomes block i of rank j, transposed. The variants:
//!
//! * `copy` (what an MPI program does): pack the blocks into a send
//!   buffer, immediate sends and receives, unpack with the transpose;
//! * `give/take`: pack each block into a pooled buffer and give it
//!   ([`hmpi::opi::collective::all_to_all_give`]); unpack what was taken —
//!   the buffers themselves change owner, no byte is copied between;
//! * `all_to_all`: pack, one [`all_to_all_into`](hmpi::traits::CommunicatorCollectives::all_to_all_into)
//!   (each rank reads its pieces in place in the others' buffers), unpack;
//! * `shared heap`: no buffers at all (thesis §5.3.1): every rank publishes
//!   its matrix's address in a node-shared array once per transpose, a
//!   counter per rank says when it is readable and when every reader is
//!   done, and each rank reads its blocks straight out of the others'
//!   matrices, transposing as it goes.
//!
//! "MiB copied" counts, per rank and per 2D FFT, the bytes the program's
//! pack and unpack loops write plus the bytes it hands to the library to
//! copy (one copy per byte sent: these messages are far above the inline
//! size, so the library copies them once, from the sender's buffer into the
//! receiver's); a give copies nothing. `--extra FILE` adds rows measured by
//! another program (the rsmpi one, `examples/fft2d-rsmpi`) to the table.

#[path = "kernel.rs"]
mod kernel;

use hmpi::opi::fusion::{Counter, NodeArray};
use hmpi::prelude::*;
use kernel::{Row, Shape, C64};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[global_allocator]
static ALLOC: hmpi::ShmHeap = hmpi::ShmHeap::new();

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Copy,
    GiveTake,
    AllToAll,
    SharedHeap,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Copy => "copy",
            Variant::GiveTake => "give/take",
            Variant::AllToAll => "all_to_all",
            Variant::SharedHeap => "shared-heap",
        }
    }
}

/// One rank's part: its rows, and what the transposes need.
struct Rank<'a> {
    world: &'a SimpleCommunicator,
    s: Shape,
    tw: Vec<C64>,
    /// The shared-heap variant's node-shared (matrix address, counter) per
    /// rank.
    shared: NodeArray<(AtomicU64, Counter)>,
    /// Transposes done by the shared-heap variant (its counter's epoch).
    fused_rounds: u64,
    /// Bytes copied so far (see the module docs).
    copied: u64,
}

impl Rank<'_> {
    fn transpose_copy(&mut self, m: &mut [C64]) -> hmpi::Result<()> {
        let (b, p) = (self.s.b, self.s.p);
        let mut send = vec![[0.0; 2]; p * b * b];
        self.s.pack_all(m, &mut send);
        let mut recv = vec![[0.0; 2]; p * b * b];
        hmpi::request::scope(|scope| -> hmpi::Result<()> {
            let mut reqs = Vec::new();
            for (i, chunk) in recv.chunks_mut(b * b).enumerate() {
                let from = self.world.process_at_rank(i as i32);
                reqs.push(from.immediate_receive_into_with_tag(
                    scope,
                    chunk.as_flattened_mut(),
                    9,
                )?);
            }
            for (j, chunk) in send.chunks(b * b).enumerate() {
                let to = self.world.process_at_rank(j as i32);
                reqs.push(to.immediate_send_with_tag(scope, chunk.as_flattened(), 9)?);
            }
            for r in reqs {
                r.wait()?;
            }
            Ok(())
        })?;
        for (i, blk) in recv.chunks(b * b).enumerate() {
            self.s.unpack(blk, i, m);
        }
        // pack, the library's copy, unpack
        self.copied += 3 * self.s.local_bytes();
        Ok(())
    }

    fn transpose_give_take(&mut self, m: &mut [C64]) -> hmpi::Result<()> {
        let (n, b) = (self.s.n, self.s.b);
        let mut out = Vec::with_capacity(self.s.p);
        for j in 0..self.s.p {
            let mut buf = OpiBuf::<f64>::with_capacity(2 * b * b)?;
            for x in 0..b {
                buf.extend_from_slice(m[x * n + j * b..][..b].as_flattened());
            }
            out.push(buf);
        }
        let got = all_to_all_give(self.world, out)?;
        for (i, blk) in got.into_iter().enumerate() {
            self.s.unpack_flat(&blk, i, m);
            // `blk` is freed here: back to this rank's pool.
        }
        // pack, unpack; the buffers change owner without a copy
        self.copied += 2 * self.s.local_bytes();
        Ok(())
    }

    fn transpose_all_to_all(&mut self, m: &mut [C64]) -> hmpi::Result<()> {
        let (b, p) = (self.s.b, self.s.p);
        let mut send = vec![[0.0; 2]; p * b * b];
        self.s.pack_all(m, &mut send);
        let mut recv = vec![[0.0; 2]; p * b * b];
        self.world
            .all_to_all_into(send.as_flattened(), recv.as_flattened_mut())?;
        for (i, blk) in recv.chunks(b * b).enumerate() {
            self.s.unpack(blk, i, m);
        }
        // pack, the collective's one copy, unpack
        self.copied += 3 * self.s.local_bytes();
        Ok(())
    }

    /// The transpose from `src` into `dst` straight through the shared
    /// heap (out of place: peers read `src` meanwhile).
    fn transpose_shared_heap(&mut self, src: &[C64], dst: &mut [C64]) {
        let (n, b, me) = (self.s.n, self.s.b, self.s.me);
        let t = self.fused_rounds;
        self.fused_rounds += 1;
        let mine = &self.shared[me];
        // Relaxed: published by the counter's add (AcqRel) right after.
        mine.0.store(src.as_ptr() as u64, Ordering::Relaxed);
        mine.1.add(1); // 2t + 1: `src` is readable
        for s in 0..self.s.p {
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
        // the transposing read is the only copy
        self.copied += self.s.local_bytes();
    }

    /// One 2D FFT of the input with `v`: the result (local rows) and the
    /// seconds spent in the two transposes.
    fn fft2d(&mut self, v: Variant) -> hmpi::Result<(Vec<C64>, f64)> {
        let mut m = self.s.local_input();
        let mut spare = vec![[0.0; 2]; m.len()];
        let mut t_comm = 0.0;
        self.s.rows_fft(&mut m, &self.tw);
        for pass in 0..2 {
            let t0 = Instant::now();
            match v {
                Variant::Copy => self.transpose_copy(&mut m)?,
                Variant::GiveTake => self.transpose_give_take(&mut m)?,
                Variant::AllToAll => self.transpose_all_to_all(&mut m)?,
                Variant::SharedHeap => {
                    self.transpose_shared_heap(&m, &mut spare);
                    std::mem::swap(&mut m, &mut spare);
                }
            }
            t_comm += t0.elapsed().as_secs_f64();
            if pass == 0 {
                self.s.rows_fft(&mut m, &self.tw);
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

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    Some(args.get(i + 1).cloned().unwrap_or_default())
}

fn number(name: &str, default: usize) -> Result<usize, String> {
    match arg(name) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| format!("{name} needs a number, not {s:?}")),
    }
}

fn run() -> Result<(), String> {
    let universe = hmpi::init().map_err(|e| e.to_string())?;
    let world = universe.world();
    let (p, me) = (world.size() as usize, world.rank() as usize);
    let n = number("--n", 512)?;
    let reps = number("--reps", 5)?.max(1);
    let s = Shape::new(n, p, me)?;
    kernel::check_fft()?;
    let shared = NodeArray::new(&world, 0, p, |_| (AtomicU64::new(0), Counter::new()))
        .map_err(|e| e.to_string())?;
    let mut rank = Rank {
        world: &world,
        s,
        tw: kernel::twiddles(n),
        shared,
        fused_rounds: 0,
        copied: 0,
    };
    let reference = kernel::serial_fft2d(n, &rank.tw);
    let mine = &reference[me * s.b * n..][..s.b * n];
    let scale = reference
        .iter()
        .map(|c| c[0].abs().max(c[1].abs()))
        .fold(1.0, f64::max);
    let mut rows = Vec::new();
    for v in [
        Variant::Copy,
        Variant::GiveTake,
        Variant::AllToAll,
        Variant::SharedHeap,
    ] {
        let (mut comm, mut total) = (Vec::new(), Vec::new());
        let mut err: f64 = 0.0;
        rank.copied = 0;
        // One untimed round first: pools, pages and caches warm.
        for rep in 0..=reps {
            world.barrier().map_err(|e| e.to_string())?;
            let t0 = Instant::now();
            let (m, t) = rank.fft2d(v).map_err(|e| e.to_string())?;
            if rep > 0 {
                total.push(t0.elapsed().as_secs_f64());
                comm.push(t);
            }
            err = m
                .iter()
                .zip(mine)
                .map(|(a, b)| kernel::dist(*a, *b) / scale)
                .fold(err, f64::max);
        }
        if err > 1e-10 {
            return Err(format!(
                "rank {me}: the {} variant differs from the serial FFT by {err:e}",
                v.name()
            ));
        }
        rows.push(Row {
            name: v.name().into(),
            total: kernel::median(&mut total),
            transpose: kernel::median(&mut comm),
            copied: rank.copied / (reps as u64 + 1),
            error: err,
        });
    }
    // Every rank checked its rows; the slowest rank's times count.
    for r in &mut rows {
        let (mut t, mut c) = (0.0, 0.0);
        world
            .all_reduce_into(&r.total, &mut t, SystemOperation::max())
            .map_err(|e| e.to_string())?;
        world
            .all_reduce_into(&r.transpose, &mut c, SystemOperation::max())
            .map_err(|e| e.to_string())?;
        (r.total, r.transpose) = (t, c);
    }
    if me == 0 {
        if let Some(f) = arg("--extra") {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("--extra {f}: {e}"))?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                rows.push(Row::from_line(line)?);
            }
        }
        println!(
            "FFT2D {n} x {n} on {p} ranks, median of {reps}; every variant matches the serial FFT"
        );
        print!("{}", kernel::table(&rows));
        if let Some(f) = arg("--png") {
            std::fs::write(&f, kernel::plot(&rows)).map_err(|e| format!("--png {f}: {e}"))?;
            println!("plot: {f}");
        }
    }
    universe.finalize().map_err(|e| e.to_string())
}
