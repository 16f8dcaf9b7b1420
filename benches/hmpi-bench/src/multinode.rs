//! `hmpi-bench multinode`: hmpi across (virtual) nodes against plain MPI
//! in the same run.
//!
//! Unlike the other workloads this one is itself the MPI program: it is
//! started by an MPI launcher with virtual nodes, every rank runs it, and
//! rank 0 prints the tables and writes the CSV:
//!
//! ```text
//! HMPI_NODES=2 mpirun -n 4 hmpi-bench multinode --rounds 5 --csv mn.csv
//! ```
//!
//! It needs feature `multinode` (hmpi-core's multi-node layer and the rsmpi
//! peer, built against the MPI whose launcher runs it). Each rank calls
//! `hmpi::init()`, which joins MPI and the node's heap; three backends then
//! carry the same loops, one after another within each round (the first of
//! a round rotates):
//!
//! * `hmpi`: the spanning communicator (`multinode::world()`), which sends
//!   to the same node through the shared heap and to another node through
//!   MPI;
//! * `mpi`: plain rsmpi on MPI's world communicator, the peer;
//! * `hmpi-node` (node-local rows only): the node's own hmpi communicator
//!   (a duplicate of the spanning communicator's `node_comm()`), which is
//!   what `hmpirun` would give the same ranks.
//!
//! Workloads (rank 0 times, the others take part):
//!
//! * `mn-latency-remote` / `mn-latency-local`: ping-pong between rank 0
//!   and the first rank of the next node, or rank 1 on rank 0's node
//!   (with at least 2 ranks per node); one-way µs;
//! * `mn-bw-remote` / `mn-bw-local`: windows of 64 nonblocking sends of
//!   one buffer, the peer receiving them one by one, then a 4-byte ack
//!   (100 windows per round up to 8 KiB, 5 above); MB/s;
//! * `mn-allreduce`: allreduce of `f64` sums over every rank (hmpi's is the
//!   hierarchical `all_reduce_into` with the predefined sum), µs per call
//!   at rank 0 after a barrier.
//!
//! Per point the value is the median of the rounds, and a row with backend
//! `hmpi/mpi` (unit `x`) holds the median of the paired per-round ratios
//! of times (for bandwidths, the ratio of the times too: mpi's MB/s over
//! hmpi's), the number the targets are stated in. `threads` is the job's
//! rank count. Ranks other than 0 exit once the run is over, so that only
//! rank 0 writes the outputs.

use crate::report::Sample;
use crate::{BenchError, Options, Outcome, Progress, Workload};

/// The workload's registration.
pub const WORKLOAD: Workload = Workload {
    name: "multinode",
    about: "hmpi across virtual nodes against plain MPI (run it under mpirun with\n              \
            HMPI_NODES=2; feature multinode): latency, bandwidth, allreduce",
    run,
    worker: None,
};

/// The sizes measured: 8 B to 1 MiB by factors of 8, and 1 MiB.
fn sizes(opts: &Options) -> Vec<usize> {
    let all: Vec<usize> = if opts.quick {
        vec![8, 4096, 1 << 20]
    } else {
        vec![8, 64, 512, 4096, 32768, 262_144, 1 << 20]
    };
    match opts.sizes {
        Some((lo, hi)) => all.into_iter().filter(|&s| s >= lo && s <= hi).collect(),
        None => all,
    }
}

#[cfg(not(feature = "multinode"))]
fn run(_: &Options, _: &Progress) -> Result<Outcome, BenchError> {
    let _ = sizes;
    let _ = Sample::from_reps;
    Err(BenchError::Usage(
        "multinode: this hmpi-bench was built without feature `multinode` \
         (cargo build --release -p hmpi-bench --features multinode, with MPICC naming \
         the MPI whose mpirun starts it)"
            .into(),
    ))
}

#[cfg(feature = "multinode")]
fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    imp::run(opts, progress)
}

#[cfg(feature = "multinode")]
mod imp {
    use super::*;
    use hmpi::hmpi_core::comm::Communicator as _;
    use hmpi::hmpi_core::multinode::{self, SpanningCommunicator};
    use hmpi::hmpi_core::raw;
    use mpi::collective::SystemOperation;
    use mpi::traits::*;
    use std::time::Instant;

    type MpiComm = mpi::topology::SimpleCommunicator;

    /// Tags of the loops.
    const TAG: i32 = 1;
    const TAG_ACK: i32 = 2;
    /// Messages in flight per bandwidth iteration (OSU's window).
    const WINDOW: usize = 64;

    /// Who carries a loop.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Backend {
        Hmpi,
        Mpi,
        Node,
    }

    impl Backend {
        fn name(self) -> &'static str {
            match self {
                Backend::Hmpi => "hmpi",
                Backend::Mpi => "mpi",
                Backend::Node => "hmpi-node",
            }
        }
    }

    struct Ctx {
        span: SpanningCommunicator,
        node: hmpi::SimpleCommunicator,
        mpi: MpiComm,
        rank: i32,
        size: i32,
    }

    fn fail(what: &str) -> impl Fn(hmpi::Error) -> BenchError + '_ {
        move |e| BenchError::Failed(format!("multinode: {what}: {e}"))
    }

    impl Ctx {
        fn barrier(&self) {
            self.mpi.barrier();
        }

        /// `peer` as a rank of the node communicator (on this node).
        fn local(&self, peer: i32) -> i32 {
            // Virtual nodes are blocks of consecutive world ranks; the
            // node's ranks follow world order.
            peer - (self.rank - self.node.rank())
        }

        fn send(&self, b: Backend, buf: &[u8], peer: i32, tag: i32) -> Result<(), BenchError> {
            match b {
                Backend::Hmpi => self.span.send(buf, peer, tag).map_err(fail("send")),
                Backend::Mpi => {
                    self.mpi.process_at_rank(peer).send_with_tag(buf, tag);
                    Ok(())
                }
                Backend::Node => {
                    raw::send(&self.node, buf, self.local(peer), tag).map_err(fail("send"))
                }
            }
        }

        fn recv(&self, b: Backend, buf: &mut [u8], peer: i32, tag: i32) -> Result<(), BenchError> {
            match b {
                Backend::Hmpi => self
                    .span
                    .recv(buf, peer, tag)
                    .map(|_| ())
                    .map_err(fail("recv")),
                Backend::Mpi => {
                    self.mpi
                        .process_at_rank(peer)
                        .receive_into_with_tag(buf, tag);
                    Ok(())
                }
                Backend::Node => {
                    let mut st = raw::Status::empty();
                    raw::recv_with_status(&self.node, buf, self.local(peer), tag, &mut st)
                        .map_err(fail("recv"))
                }
            }
        }

        /// `WINDOW` nonblocking sends of `buf`, all waited for.
        fn send_window(&self, b: Backend, buf: &[u8], peer: i32) -> Result<(), BenchError> {
            match b {
                Backend::Hmpi => {
                    let mut reqs = Vec::with_capacity(WINDOW);
                    for _ in 0..WINDOW {
                        // SAFETY: every request is waited for below, before
                        // `buf`'s borrow ends.
                        unsafe { self.span.isend_into(&mut reqs, buf, peer, TAG, false) }
                            .map_err(fail("isend"))?;
                    }
                    for r in reqs {
                        r.wait().map_err(fail("wait"))?;
                    }
                }
                Backend::Mpi => mpi::request::scope(|s| {
                    let p = self.mpi.process_at_rank(peer);
                    let reqs: Vec<_> = (0..WINDOW)
                        .map(|_| p.immediate_send_with_tag(s, buf, TAG))
                        .collect();
                    for r in reqs {
                        r.wait();
                    }
                }),
                Backend::Node => {
                    let l = self.local(peer);
                    let mut reqs = Vec::with_capacity(WINDOW);
                    for _ in 0..WINDOW {
                        // SAFETY: as above.
                        reqs.push(
                            unsafe { raw::isend(&self.node, buf, l, TAG, false) }
                                .map_err(fail("isend"))?,
                        );
                    }
                    for r in reqs {
                        r.wait()
                            .map_err(|e| BenchError::Failed(format!("multinode: wait: {e}")))?;
                    }
                }
            }
            Ok(())
        }

        fn allreduce(&self, b: Backend, send: &[f64], recv: &mut [f64]) -> Result<(), BenchError> {
            match b {
                Backend::Hmpi | Backend::Node => {
                    self.span
                        .all_reduce_into(send, recv, hmpi::hmpi_core::op::SystemOperation::sum())
                        .map_err(fail("allreduce"))?;
                }
                Backend::Mpi => self.mpi.all_reduce_into(send, recv, SystemOperation::sum()),
            }
            Ok(())
        }
    }

    /// One-way µs of `iters` ping-pongs of `size` bytes between rank 0 and
    /// `peer` (rank 0's value; others return 0).
    fn latency(
        c: &Ctx,
        b: Backend,
        peer: i32,
        size: usize,
        iters: usize,
        buf: &mut [u8],
    ) -> Result<f64, BenchError> {
        let buf = &mut buf[..size];
        c.barrier();
        let t = Instant::now();
        if c.rank == 0 {
            for _ in 0..iters {
                c.send(b, buf, peer, TAG)?;
                c.recv(b, buf, peer, TAG)?;
            }
        } else if c.rank == peer {
            for _ in 0..iters {
                c.recv(b, buf, 0, TAG)?;
                c.send(b, buf, 0, TAG)?;
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / (2 * iters) as f64)
    }

    /// MB/s of `iters` windows of `size` bytes from rank 0 to `peer`.
    fn bandwidth(
        c: &Ctx,
        b: Backend,
        peer: i32,
        size: usize,
        iters: usize,
        buf: &mut [u8],
    ) -> Result<f64, BenchError> {
        let mut ack = [0u8; 4];
        c.barrier();
        let t = Instant::now();
        if c.rank == 0 {
            for _ in 0..iters {
                c.send_window(b, &buf[..size], peer)?;
                c.recv(b, &mut ack, peer, TAG_ACK)?;
            }
        } else if c.rank == peer {
            for _ in 0..iters {
                for _ in 0..WINDOW {
                    c.recv(b, &mut buf[..size], 0, TAG)?;
                }
                c.send(b, &ack, 0, TAG_ACK)?;
            }
        }
        let s = t.elapsed().as_secs_f64();
        Ok((iters * WINDOW * size) as f64 / s / 1e6)
    }

    /// µs per allreduce of `size` bytes of `f64`s over every rank.
    fn allreduce(c: &Ctx, b: Backend, size: usize, iters: usize) -> Result<f64, BenchError> {
        let n = (size / 8).max(1);
        let send: Vec<f64> = (0..n).map(|i| (i as f64) + f64::from(c.rank)).collect();
        let mut recv = vec![0f64; n];
        c.allreduce(b, &send, &mut recv)?;
        // Checked once: the last element is the sum over ranks of
        // `n - 1 + rank`.
        let last = (n - 1) as f64 * f64::from(c.size) + f64::from(c.size * (c.size - 1) / 2);
        if recv[n - 1] != last {
            return Err(BenchError::Failed(format!(
                "multinode: {} allreduce of {size} B gave {} where {last} was due",
                b.name(),
                recv[n - 1]
            )));
        }
        c.barrier();
        let t = Instant::now();
        for _ in 0..iters {
            c.allreduce(b, &send, &mut recv)?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e6 / iters as f64)
    }

    /// One measured point: its samples per backend, per round.
    struct Point {
        workload: &'static str,
        size: usize,
        unit: &'static str,
        /// Per backend, one value per round.
        values: Vec<(Backend, Vec<f64>)>,
        /// Whether larger values are better (bandwidth).
        higher_better: bool,
    }

    pub(super) fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
        if multinode::launcher().is_none() {
            return Err(BenchError::Usage(
                "multinode runs under an MPI launcher with virtual nodes, e.g. \
                 HMPI_NODES=2 mpirun -n 4 hmpi-bench multinode"
                    .into(),
            ));
        }
        let universe = hmpi::init().map_err(fail("init"))?;
        let span = multinode::world().map_err(fail("world"))?;
        // The node's own hmpi communicator (the world of `hmpirun` on the
        // same ranks); `universe.world()` spans every node under an MPI
        // launcher.
        let node = span.node_comm().duplicate().map_err(fail("node"))?;
        let c = Ctx {
            node,
            mpi: MpiComm::world(),
            rank: span.rank(),
            size: span.size(),
            span,
        };
        if c.span.nodes() < 2 {
            return Err(BenchError::Usage(
                "multinode needs 2 nodes or more: set HMPI_NODES=2".into(),
            ));
        }
        // Rank 0's peers, the same on every rank: the first rank of
        // another node, and rank 1 if it shares rank 0's node.
        let node_of = |r: i32| c.span.node_of(r).map_err(fail("node_of"));
        let home = node_of(0)?;
        let mut remote = None;
        for r in 1..c.size {
            if node_of(r)? != home {
                remote = Some(r);
                break;
            }
        }
        let remote =
            remote.ok_or_else(|| BenchError::Failed("multinode: no second node".into()))?;
        let local = (c.size > 1 && node_of(1)? == home).then_some(1);
        let rounds = opts.rounds.unwrap_or(3);
        let div = if opts.quick { 10 } else { 1 };
        let ppn = c.node.size();
        if c.rank == 0 {
            progress.line(format_args!(
                "multinode: {} ranks on {} nodes ({ppn} on rank 0's node), remote peer {remote}, \
                 local peer {local:?}, {rounds} rounds",
                c.size,
                c.span.nodes()
            ));
        }
        let max = sizes(opts).into_iter().max().unwrap_or(8);
        let mut buf = vec![0u8; max];
        let mut points: Vec<Point> = Vec::new();
        let mut pairs: Vec<(&'static str, i32, Vec<Backend>)> =
            vec![("remote", remote, vec![Backend::Hmpi, Backend::Mpi])];
        if let Some(l) = local {
            pairs.push(("local", l, vec![Backend::Hmpi, Backend::Mpi, Backend::Node]));
        }
        for &size in &sizes(opts) {
            let lat_iters = (if size <= 8192 { 1000 } else { 100 }) / div;
            let bw_iters = (if size <= 8192 { 100 } else { 5 }).max(div) / div;
            let ar_iters = (if size <= 65536 { 200 } else { 20 }) / div;
            for (kind, peer, backends) in &pairs {
                let (lw, bw): (&'static str, &'static str) = if *kind == "remote" {
                    ("mn-latency-remote", "mn-bw-remote")
                } else {
                    ("mn-latency-local", "mn-bw-local")
                };
                let mut lat = Point {
                    workload: lw,
                    size,
                    unit: "us",
                    values: backends.iter().map(|&b| (b, Vec::new())).collect(),
                    higher_better: false,
                };
                let mut bwp = Point {
                    workload: bw,
                    size,
                    unit: "MB/s",
                    values: backends.iter().map(|&b| (b, Vec::new())).collect(),
                    higher_better: true,
                };
                for round in 0..rounds {
                    for k in 0..backends.len() {
                        let i = (k + round) % backends.len();
                        let b = backends[i];
                        let l = latency(&c, b, *peer, size, lat_iters.max(1), &mut buf)?;
                        lat.values[i].1.push(l);
                        let w = bandwidth(&c, b, *peer, size, bw_iters.max(1), &mut buf)?;
                        bwp.values[i].1.push(w);
                    }
                }
                points.push(lat);
                points.push(bwp);
            }
            let mut ar = Point {
                workload: "mn-allreduce",
                size,
                unit: "us",
                values: vec![(Backend::Hmpi, Vec::new()), (Backend::Mpi, Vec::new())],
                higher_better: false,
            };
            for round in 0..rounds {
                for k in 0..2 {
                    let i = (k + round) % 2;
                    let t = allreduce(&c, ar.values[i].0, size, ar_iters.max(1))?;
                    ar.values[i].1.push(t);
                }
            }
            points.push(ar);
            if c.rank == 0 {
                progress.line(format_args!("multinode: {size} B done"));
            }
        }
        c.barrier();
        let (rank, size) = (c.rank, c.size);
        drop(c);
        drop(universe);
        if rank != 0 {
            std::process::exit(0);
        }
        Ok(outcome(&points, size as u32))
    }

    /// The samples and the table of rank 0's points.
    fn outcome(points: &[Point], ranks: u32) -> Outcome {
        let mut samples = Vec::new();
        let mut text = format!(
            "multinode: {ranks} ranks; per point the median of the rounds; hmpi/mpi: median of the \
             paired per-round time ratios (< 1: hmpi faster)\n\n{:<18} {:>8} {:>12} {:>12} {:>12} {:>9} {:>9}\n",
            "workload", "size", "hmpi", "mpi", "hmpi-node", "hmpi/mpi", "hmpi/node"
        );
        for p in points {
            let get = |b: Backend| p.values.iter().find(|(x, _)| *x == b).map(|(_, v)| v);
            for (b, v) in &p.values {
                if let Some(s) = Sample::from_reps(p.workload, b.name(), ranks, p.size, p.unit, v) {
                    samples.push(s);
                }
            }
            // Paired ratios of times (bandwidths: inverted).
            let ratio = |x: Backend, y: Backend| -> Option<f64> {
                let (a, b) = (get(x)?, get(y)?);
                let r: Vec<f64> = a
                    .iter()
                    .zip(b)
                    .map(|(a, b)| if p.higher_better { b / a } else { a / b })
                    .collect();
                crate::stats::median(&r)
            };
            let mut cells = Vec::new();
            for (pair, x, y) in [
                ("hmpi/mpi", Backend::Hmpi, Backend::Mpi),
                ("hmpi/hmpi-node", Backend::Hmpi, Backend::Node),
            ] {
                let r = ratio(x, y);
                if let (Some(a), Some(b)) = (get(x), get(y)) {
                    let per: Vec<f64> = a
                        .iter()
                        .zip(b)
                        .map(|(a, b)| if p.higher_better { b / a } else { a / b })
                        .collect();
                    if let Some(s) = Sample::from_reps(p.workload, pair, ranks, p.size, "x", &per) {
                        samples.push(s);
                    }
                }
                cells.push(r.map_or("-".to_string(), |r| format!("{r:.2}")));
            }
            let med = |b: Backend| {
                get(b)
                    .and_then(|v| crate::stats::median(v))
                    .map_or("-".to_string(), |m| format!("{m:.2}"))
            };
            text += &format!(
                "{:<18} {:>8} {:>12} {:>12} {:>12} {:>9} {:>9}\n",
                p.workload,
                crate::report::fmt_size(p.size),
                med(Backend::Hmpi),
                med(Backend::Mpi),
                med(Backend::Node),
                cells[0],
                cells[1]
            );
        }
        Outcome {
            samples,
            text,
            failures: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_options() {
        let mut o = Options::default();
        assert_eq!(sizes(&o), vec![8, 64, 512, 4096, 32768, 262_144, 1 << 20]);
        o.quick = true;
        assert_eq!(sizes(&o), vec![8, 4096, 1 << 20]);
        o.quick = false;
        o.sizes = Some((64, 4096));
        assert_eq!(sizes(&o), vec![64, 512, 4096]);
        o.sizes = Some((3, 7));
        assert!(sizes(&o).is_empty());
    }

    #[cfg(not(feature = "multinode"))]
    #[test]
    fn without_the_feature_it_says_how_to_build() {
        let e = run(&Options::default(), &Progress::new()).err().unwrap();
        assert!(matches!(e, BenchError::Usage(m) if m.contains("--features multinode")));
    }
}
