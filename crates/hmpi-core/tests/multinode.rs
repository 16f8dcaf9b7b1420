//! Across nodes (feature `mpi`): the spanning communicator's
//! point-to-point and collectives under a real `mpirun`, with the ranks of
//! one machine split into virtual nodes (`HMPI_NODES`).
//!
//! Run plainly (`cargo test -p hmpi-core --features mpi --test
//! multinode`), this binary is the driver: it asks the MPI library it was
//! built against which one it is, and runs itself under that MPI's
//! launcher (`mpirun.openmpi` or `mpiexec.mpich`; `HMPI_TEST_MPIRUN`
//! overrides) with 2 and 3 virtual nodes of 1 to 3 ranks, then checks that
//! a rank dying on one virtual node ends the whole job with a message.
//! Under the launcher (`HMPI_MULTINODE_ROLE` set by the driver) it is a
//! rank and runs the role named there; every check compares with a serial
//! computation and panics on a difference, which ends the job.

use hmpi_core::multinode::{self, SpanningCommunicator};
use hmpi_core::traits::*;
use hmpi_core::{ANY_SOURCE, ANY_TAG, PROC_NULL};
use shmheap::ShmHeap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const ROLE_VAR: &str = "HMPI_MULTINODE_ROLE";

fn main() {
    match std::env::var(ROLE_VAR) {
        Ok(role) => rank_main(&role),
        Err(_) => driver(),
    }
}

// ---------------------------------------------------------------------------
// The driver.

/// The launcher of the MPI this binary links, and its arguments.
fn launcher() -> Vec<String> {
    if let Ok(cmd) = std::env::var("HMPI_TEST_MPIRUN") {
        return cmd.split_whitespace().map(str::to_owned).collect();
    }
    let version = multinode::library_version().unwrap_or_default();
    let mut cmd: Vec<String> = if version.contains("Open MPI") {
        let mut c = vec!["mpirun.openmpi".to_owned(), "--oversubscribe".to_owned()];
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } == 0 {
            c.push("--allow-run-as-root".to_owned());
        }
        c
    } else if version.contains("MPICH") {
        vec!["mpiexec.mpich".to_owned()]
    } else {
        panic!("unknown MPI library ({version:?}); set HMPI_TEST_MPIRUN");
    };
    cmd.push("-n".to_owned());
    cmd
}

/// Runs `ranks` ranks of this binary in `role` on `nodes` virtual nodes;
/// the exit status and the combined output. A job still running after
/// `limit` is killed and reported as such.
fn run(role: &str, ranks: u32, nodes: Option<u32>, limit: Duration) -> (Option<i32>, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = launcher();
    cmd.push(ranks.to_string());
    let out = std::env::temp_dir().join(format!(
        "hmpi-multinode-{}-{role}-{ranks}-{nodes:?}.log",
        std::process::id()
    ));
    let file = std::fs::File::create(&out).expect("log file");
    let mut command = Command::new(&cmd[0]);
    command.args(&cmd[1..]).arg(&exe).env(ROLE_VAR, role);
    match nodes {
        Some(k) => command.env(multinode::NODES_VAR, k.to_string()),
        None => command.env_remove(multinode::NODES_VAR),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", cmd[0]));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st.code().unwrap_or(-1));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    (status, log)
}

fn driver() {
    let mut failed = 0;
    // 2 and 3 virtual nodes of 1 to 3 ranks (blocks of r·k/n); 2 nodes
    // of 2 ranks each (the lanes of the large allreduces). And once
    // without HMPI_NODES: the machine is the one node.
    for (ranks, nodes) in [(2, 2), (4, 2), (5, 2), (3, 3), (7, 3), (3, 1)] {
        let t0 = Instant::now();
        let k = (nodes > 1).then_some(nodes);
        let (st, log) = run("suite", ranks, k, Duration::from_secs(600));
        let want = format!("multinode suite: {ranks} ranks on {nodes} nodes: ok");
        if st == Some(0) && log.contains(&want) {
            println!(
                "test suite {ranks} ranks / {nodes} nodes ... ok ({:.1} s)",
                t0.elapsed().as_secs_f64()
            );
        } else {
            failed += 1;
            println!("test suite {ranks} ranks / {nodes} nodes ... FAILED (status {st:?})\n{log}");
        }
    }
    // A rank that panics on node 1 ends the job, saying so.
    let (st, log) = run("die-panic", 4, Some(2), Duration::from_secs(120));
    let msg = "hmpi: rank 3 (node 1 of 2) failed; ending the job";
    if st.is_some_and(|c| c != 0) && log.contains(msg) {
        println!("test a panicking rank ends the job ... ok");
    } else {
        failed += 1;
        println!("test a panicking rank ends the job ... FAILED (status {st:?})\n{log}");
    }
    // A rank that exits without finalizing ends the job too (the
    // launcher's own message).
    let (st, log) = run("die-exit", 4, Some(2), Duration::from_secs(120));
    if st.is_some_and(|c| c != 0) {
        println!("test a rank exiting early ends the job ... ok");
    } else {
        failed += 1;
        println!("test a rank exiting early ends the job ... FAILED (status {st:?})\n{log}");
    }
    // A bad node count is a clear error on every rank.
    let (st, log) = run("bad-nodes", 2, Some(2), Duration::from_secs(120));
    if st.is_some_and(|c| c != 0) && log.contains("HMPI_NODES=5") {
        println!("test a bad HMPI_NODES is an error ... ok");
    } else {
        failed += 1;
        println!("test a bad HMPI_NODES is an error ... FAILED (status {st:?})\n{log}");
    }
    if failed > 0 {
        eprintln!("{failed} multinode test(s) failed");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------
// The ranks.

fn rank_main(role: &str) {
    if role == "bad-nodes" {
        std::env::set_var(multinode::NODES_VAR, "5");
        match hmpi_core::init() {
            Ok(_) => panic!("HMPI_NODES=5 with 2 ranks was accepted"),
            Err(e) => {
                eprintln!("init refused: {e}");
                std::process::exit(2);
            }
        }
    }
    let universe = hmpi_core::init().expect("init");
    let world = multinode::world().expect("the spanning world");
    match role {
        "suite" => suite(&universe, &world),
        "die-panic" | "die-exit" => {
            if world.rank() == 3 {
                if role == "die-panic" {
                    panic!("rank 3 fails on purpose");
                }
                std::process::exit(3);
            }
            // The others wait for a message that never comes.
            let mut b = [0u8; 1];
            match world.recv(&mut b, 3, 1) {
                Ok(_) => panic!("a message from a dead rank arrived"),
                Err(e) => {
                    eprintln!("rank {}: receive from the dead rank: {e}", world.rank());
                    std::process::exit(4);
                }
            }
        }
        _ => panic!("unknown role {role}"),
    }
    drop(universe);
    // After finalize: errors, and MPI is not called.
    let fin = |r: hmpi_core::Result<()>| matches!(r, Err(hmpi_core::Error::Finalized));
    let far = world.size() - 1 - world.rank();
    assert!(fin(world.send(b"x", far, 0)));
    assert!(fin(world.barrier()));
    assert!(fin(world.bcast_bytes(&mut vec![1], 0)));
    assert!(fin(world.allgatherv_bytes(b"x").map(|_| ())));
    assert!(fin(world.allreduce(&[1u8], |a, b| a + b).map(|_| ())));
    assert!(fin(world.iprobe(far, 0).map(|_| ())));
    assert!(matches!(
        multinode::world(),
        Err(hmpi_core::Error::Finalized)
    ));
}

/// The byte `i` of the message of `size` bytes from `src` with `salt`.
fn pattern(src: i32, size: usize, salt: u32, i: usize) -> u8 {
    let x = (i as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((src as u64) << 40)
        .wrapping_add((size as u64) << 8)
        .wrapping_add(u64::from(salt));
    (x ^ (x >> 29) ^ (x >> 47)) as u8
}

fn filled(src: i32, size: usize, salt: u32) -> Vec<u8> {
    (0..size).map(|i| pattern(src, size, salt, i)).collect()
}

fn check_filled(buf: &[u8], src: i32, salt: u32, what: &str) {
    for (i, &b) in buf.iter().enumerate() {
        let want = pattern(src, buf.len(), salt, i);
        assert_eq!(b, want, "{what}: byte {i} of {} from {src}", buf.len());
    }
}

fn suite(universe: &hmpi_core::Universe, world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    // Without HMPI_NODES the nodes are the machines: one here.
    let nodes: u32 = std::env::var(multinode::NODES_VAR).map_or(1, |v| v.parse().unwrap());
    layout(universe, world, nodes);
    ordering(world);
    send_windows(world);
    wildcards(world);
    probes(world);
    synchronous(world);
    sizes(world);
    truncation(world);
    nonblocking(world);
    cancel(world);
    ownership(world);
    threads(world);
    stencil(world);
    collectives(world);
    predefined_reductions(world);
    scans(world);
    nonblocking_collectives(world);
    split_and_dup(world);
    windows(world);
    errors(world);
    typed_api(universe);
    world.barrier().unwrap();
    if rank == 0 {
        println!("multinode suite: {size} ranks on {nodes} nodes: ok");
    }
}

/// World rank = MPI's, nodes as HMPI_NODES says, the node world is the
/// node's block.
fn layout(universe: &hmpi_core::Universe, world: &SpanningCommunicator, nodes: u32) {
    let (rank, size) = (world.rank(), world.size());
    for var in ["OMPI_COMM_WORLD_RANK", "PMI_RANK"] {
        if let Ok(v) = std::env::var(var) {
            assert_eq!(v.parse::<i32>().unwrap(), rank, "{var}");
        }
    }
    assert_eq!(multinode::nodes(), nodes);
    assert_eq!(world.nodes(), nodes as usize);
    let node_of = |r: i32| (i64::from(r) * i64::from(nodes) / i64::from(size)) as u32;
    assert_eq!(multinode::node(), node_of(rank));
    let block: Vec<i32> = (0..size).filter(|&r| node_of(r) == node_of(rank)).collect();
    // The typed API's world spans every node; its node part is the
    // node's block.
    let typed = universe.world();
    assert_eq!((typed.rank(), typed.size()), (rank, size));
    assert!(typed.spans_nodes());
    let node_world = typed.split_shared(0).unwrap();
    assert!(!node_world.spans_nodes());
    assert_eq!(node_world.size() as usize, block.len());
    assert_eq!(block[node_world.rank() as usize], rank);
    for r in 0..size {
        assert_eq!(world.node_of(r).unwrap(), node_of(r));
        assert_eq!(world.is_local(r).unwrap(), node_of(r) == node_of(rank));
    }
}

/// Messages of each pair arrive in the order sent, local and remote.
fn ordering(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    const K: u32 = 40;
    let msgs: Vec<Vec<u8>> = (0..K).map(|k| k.to_le_bytes().to_vec()).collect();
    let mut reqs = Vec::new();
    for d in 0..size {
        for m in &msgs {
            // SAFETY: every request is waited for below, before `msgs` goes.
            reqs.push(unsafe { world.isend(m, d, 7, false) }.unwrap());
        }
    }
    for s in 0..size {
        for k in 0..K {
            let mut b = [0u8; 4];
            let st = world.recv(&mut b, s, 7).unwrap();
            assert_eq!((st.source, st.tag, st.count), (s, 7, 4));
            assert_eq!(u32::from_le_bytes(b), k, "message {k} from {s} overtaken");
        }
    }
    for r in reqs {
        r.wait().unwrap();
    }
    world.barrier().unwrap();
    let _ = rank;
}

/// Windows of sends started with `isend_into` (to this node and to
/// others, small ones that finish at once and large ones that wait),
/// mixed with `isend` to the same peers, keep each pair's order and
/// report each send's status; a bad rank or tag is an error that leaves
/// the window as it was.
fn send_windows(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    const K: usize = 24;
    // Every third message large: past the fast box and the eager limits.
    let len = |k: usize| if k % 3 == 2 { 200_000 } else { 8 + k };
    let msgs: Vec<Vec<Vec<u8>>> = (0..size)
        .map(|d| {
            (0..K)
                .map(|k| filled(rank, len(k), (d as u32) << 8 | k as u32))
                .collect()
        })
        .collect();
    let mut reqs = Vec::new();
    for d in 0..size {
        for (k, m) in msgs[d as usize].iter().enumerate() {
            if k % 2 == 0 {
                // SAFETY: every request is waited for below, before
                // `msgs` goes.
                unsafe { world.isend_into(&mut reqs, m, d, 8, false) }.unwrap();
            } else {
                // SAFETY: as above.
                reqs.push(unsafe { world.isend(m, d, 8, false) }.unwrap());
            }
        }
    }
    assert_eq!(reqs.len(), size as usize * K);
    let before = reqs.len();
    // SAFETY: nothing is started by a failing call.
    let bad = unsafe { world.isend_into(&mut reqs, &msgs[0][0], size, 8, false) };
    assert!(matches!(bad, Err(hmpi_core::Error::Rank { .. })), "{bad:?}");
    // SAFETY: as above.
    let bad = unsafe { world.isend_into(&mut reqs, &msgs[0][0], 0, -5, false) };
    assert!(matches!(bad, Err(hmpi_core::Error::Tag { .. })), "{bad:?}");
    assert_eq!(reqs.len(), before);
    let mut buf = vec![0u8; 200_000];
    for s in 0..size {
        for k in 0..K {
            let st = world.recv(&mut buf, s, 8).unwrap();
            assert_eq!((st.source, st.tag, st.count), (s, 8, len(k) as u64));
            let salt = (rank as u32) << 8 | k as u32;
            check_filled(&buf[..len(k)], s, salt, "a window's message");
        }
    }
    for (i, r) in reqs.into_iter().enumerate() {
        let (d, k) = ((i / K) as i32, i % K);
        let st = r.wait().unwrap();
        assert_eq!(
            (st.source, st.tag, st.count),
            (d, 8, len(k) as u64),
            "send {k} to {d}"
        );
    }
    world.barrier().unwrap();
}

/// ANY_SOURCE receives take local and remote senders, each in order;
/// ANY_TAG with one source keeps the order too.
fn wildcards(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    const K: u32 = 30;
    if rank == 0 {
        let mut next = vec![0u32; size as usize];
        let mut from_remote = false;
        let mut from_local = false;
        for _ in 0..K * (size as u32 - 1) {
            let mut b = [0u8; 8];
            let st = world.recv(&mut b, ANY_SOURCE, 9).unwrap();
            let src = i32::from_le_bytes(b[..4].try_into().unwrap());
            let k = u32::from_le_bytes(b[4..].try_into().unwrap());
            assert_eq!(st.source, src, "status names the sender");
            assert_eq!(k, next[src as usize], "order from {src}");
            next[src as usize] += 1;
            from_remote |= !world.is_local(src).unwrap();
            from_local |= src != 0 && world.is_local(src).unwrap();
        }
        assert_eq!(
            from_remote,
            world.nodes() > 1,
            "remote senders matched ANY_SOURCE"
        );
        let local_peers = (1..size).any(|r| world.is_local(r).unwrap());
        assert_eq!(from_local, local_peers);
    } else {
        for k in 0..K {
            let mut b = rank.to_le_bytes().to_vec();
            b.extend_from_slice(&k.to_le_bytes());
            world.send(&b, 0, 9).unwrap();
        }
    }
    // ANY_TAG from one source: tags vary, order holds.
    let peer = (rank + 1) % size;
    let from = (rank + size - 1) % size;
    for k in 0..10i32 {
        world.send(&k.to_le_bytes(), peer, 100 + k).unwrap();
    }
    for k in 0..10i32 {
        let mut b = [0u8; 4];
        let st = world.recv(&mut b, from, ANY_TAG).unwrap();
        assert_eq!((st.tag, i32::from_le_bytes(b)), (100 + k, k));
    }
    world.barrier().unwrap();
}

/// probe and iprobe report source, tag and length without receiving.
fn probes(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let peer = (rank + 1) % size;
    let from = (rank + size - 1) % size;
    assert!(world.iprobe(ANY_SOURCE, 77).unwrap().is_none());
    world.barrier().unwrap();
    let msg = filled(rank, 100 + rank as usize, 3);
    world.send(&msg, peer, 11).unwrap();
    let st = world.probe(ANY_SOURCE, 11).unwrap();
    assert_eq!((st.source, st.tag, st.count), (from, 11, 100 + from as u64));
    let st2 = world
        .iprobe(from, ANY_TAG)
        .unwrap()
        .expect("iprobe after probe");
    assert_eq!((st2.source, st2.count), (from, st.count));
    let mut buf = vec![0u8; st.count as usize];
    world.recv(&mut buf, from, 11).unwrap();
    check_filled(&buf, from, 3, "probe");
    // PROC_NULL: an empty status at once.
    let st = world.probe(PROC_NULL, 0).unwrap();
    assert_eq!(st.source, PROC_NULL);
    world.send(b"x", PROC_NULL, 0).unwrap();
    world.barrier().unwrap();
}

/// A synchronous send completes only after its receive has started.
fn synchronous(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    for target in [1, size - 1] {
        if rank == 0 {
            world.ssend(b"sync", target, 5).unwrap();
            let done = hmpi_core::time();
            world.send(&done.to_le_bytes(), target, 6).unwrap();
        } else if rank == target {
            std::thread::sleep(Duration::from_millis(200));
            let posted = hmpi_core::time();
            let mut b = [0u8; 4];
            world.recv(&mut b, 0, 5).unwrap();
            let mut t = [0u8; 8];
            world.recv(&mut t, 0, 6).unwrap();
            let done = f64::from_le_bytes(t);
            assert!(
                done >= posted,
                "ssend to {target} completed before its receive was posted"
            );
        }
        world.barrier().unwrap();
    }
}

/// 0 B to 16 MiB, every distance, checked byte by byte.
fn sizes(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let sizes = [0usize, 1, 7, 64, 4096, 65_539, 1 << 20, 16 << 20];
    for (salt, &n) in sizes.iter().enumerate() {
        let dists: Vec<i32> = if n > (1 << 20) {
            vec![1, size / 2 + 1]
        } else {
            (1..size.max(2)).collect()
        };
        for &d in &dists {
            let d = d % size;
            let to = (rank + d) % size;
            let from = (rank + size - d) % size;
            let out = filled(rank, n, salt as u32);
            // SAFETY: waited for before `out` goes.
            let req = unsafe { world.isend(&out, to, 20, false) }.unwrap();
            let mut buf = vec![0u8; n];
            let st = world.recv(&mut buf, from, 20).unwrap();
            assert_eq!((st.source, st.count), (from, n as u64));
            check_filled(&buf, from, salt as u32, "sizes");
            req.wait().unwrap();
        }
    }
    world.barrier().unwrap();
}

/// A message longer than the receive buffer, from a peer on this node and
/// from one on another (a receive posted in MPI): the receive completes
/// with the truncation in its status, as on the node, not with an error.
fn truncation(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let open_mpi = multinode::library_version()
        .unwrap_or_default()
        .contains("Open MPI");
    let (to, from) = ((rank + 1) % size, (rank + size - 1) % size);
    // Open MPI 4's shared-memory transport writes the whole of a message
    // longer than its eager limit (4 KiB) past a posted receive's buffer
    // (its single-copy path), so between its virtual nodes only a short
    // message is truncated here.
    for (salt, n) in [(60u32, 100usize), (61, 1 << 20)] {
        let cap = 10 + salt as usize;
        let skip = |peer: i32| open_mpi && n > 4096 && !world.is_local(peer).unwrap();
        let out = filled(rank, n, salt);
        // SAFETY: waited for below, before `out` goes.
        let sreq = (!skip(to)).then(|| unsafe { world.isend(&out, to, 50, false) }.unwrap());
        if skip(from) {
            if let Some(r) = sreq {
                r.wait().unwrap();
            }
            world.barrier().unwrap();
            continue;
        }
        let mut buf = vec![0u8; cap];
        // SAFETY: waited for below, before `buf` goes.
        let rreq = unsafe { world.irecv(&mut buf, from, 50) }.unwrap();
        let st = rreq.wait().unwrap();
        if let Some(r) = sreq {
            r.wait().unwrap();
        }
        assert_eq!((st.source, st.tag), (from, 50), "truncated status");
        let Some(hmpi_core::raw::StatusError::Truncate { message_len }) = st.error else {
            panic!("a truncated receive from {from} reported {:?}", st.error);
        };
        let local = world.is_local(from).unwrap();
        assert!(st.count <= cap as u64);
        if local || open_mpi {
            assert_eq!((message_len, st.count), (n as u64, cap as u64));
        } else {
            assert!(message_len > cap as u64);
        }
        let head = &buf[..st.count as usize];
        for (i, &b) in head.iter().enumerate() {
            assert_eq!(
                b,
                pattern(from, n, salt, i),
                "byte {i} of a truncated receive"
            );
        }
        world.barrier().unwrap();
    }
}

/// Nonblocking receives, wildcard ones included, match in posting order.
fn nonblocking(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let last = size - 1; // on another node than 0
    if rank == 0 {
        let (mut a, mut b, mut c) = ([0u8; 1], [0u8; 1], [0u8; 1]);
        // SAFETY: each request is waited for below.
        let ra = unsafe { world.irecv(&mut a, ANY_SOURCE, ANY_TAG) }.unwrap();
        // SAFETY: as above.
        let rb = unsafe { world.irecv(&mut b, last, 30) }.unwrap();
        // SAFETY: as above.
        let rc = unsafe { world.irecv(&mut c, ANY_SOURCE, 31) }.unwrap();
        world.send(b"g", last, 29).unwrap(); // go
        let sb = rb.wait().unwrap();
        let sa = ra.wait().unwrap();
        let sc = rc.wait().unwrap();
        assert_eq!((sa.source, sa.tag, a[0]), (last, 30, b'1'));
        assert_eq!((sb.source, sb.tag, b[0]), (last, 30, b'2'));
        assert_eq!((sc.source, sc.tag, c[0]), (last, 31, b'3'));
    } else if rank == last {
        let mut g = [0u8; 1];
        world.recv(&mut g, 0, 29).unwrap();
        world.send(b"1", 0, 30).unwrap();
        world.send(b"2", 0, 30).unwrap();
        world.send(b"3", 0, 31).unwrap();
    }
    world.barrier().unwrap();
    // Synchronous nonblocking sends to every peer, received in reverse.
    let msgs: Vec<[u8; 4]> = (0..size).map(|d| (rank * 1000 + d).to_le_bytes()).collect();
    let mut reqs = Vec::new();
    for d in 0..size {
        // SAFETY: waited for below.
        reqs.push(unsafe { world.isend(&msgs[d as usize], d, 40, true) }.unwrap());
    }
    for s in (0..size).rev() {
        let mut b = [0u8; 4];
        world.recv(&mut b, s, 40).unwrap();
        assert_eq!(i32::from_le_bytes(b), s * 1000 + rank);
    }
    for mut r in reqs {
        loop {
            if r.test().unwrap().is_some() {
                break;
            }
        }
    }
    world.barrier().unwrap();
}

/// Receives that never match are cancelled, from a local peer, a remote
/// one and any source.
fn cancel(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    for src in [rank, (rank + size - 1) % size, ANY_SOURCE] {
        let mut b = [0u8; 8];
        // SAFETY: waited for below.
        let mut r = unsafe { world.irecv(&mut b, src, 999) }.unwrap();
        assert!(r.cancel().unwrap());
        let st = r.wait().unwrap();
        assert!(st.cancelled, "receive from {src} not cancelled");
    }
    world.barrier().unwrap();
}

/// Give and take across nodes: local peers get the block, remote ones its
/// bytes in a fresh block; contents checked element by element.
fn ownership(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    for d in 1..size.max(2) {
        let to = (rank + d) % size;
        let from = (rank + size - d) % size;
        for n in [0usize, 10, 1 << 18] {
            let v: Vec<u64> = (0..n as u64).map(|i| i * 1000 + rank as u64).collect();
            // SAFETY: a vector's block of the global allocator, given up.
            unsafe { world.give(hmpi_core::raw::OwnedBlock::from_vec(v), to, 50) }.unwrap();
            let (block, st) = world.take(8, from, 50).unwrap();
            assert_eq!((st.source, st.count), (from, 8 * n as u64));
            // SAFETY: the block is ours, of u64s written by the sender.
            let got: Vec<u64> = unsafe { block.into_vec() }.expect("a block of u64s");
            assert_eq!(got.len(), n);
            for (i, &x) in got.iter().enumerate() {
                assert_eq!(x, i as u64 * 1000 + from as u64, "element {i} from {from}");
            }
        }
    }
    assert!(matches!(
        world.take(8, ANY_SOURCE, 0),
        Err(hmpi_core::Error::Rank { .. })
    ));
    assert!(world.take(3, 0, 0).is_err());
    world.barrier().unwrap();
}

/// Two threads of every rank at once, each on its own duplicate: a ring
/// with wildcard receives, checked in order.
fn threads(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let comms = [world.duplicate().unwrap(), world.duplicate().unwrap()];
    std::thread::scope(|sc| {
        for (t, c) in comms.iter().enumerate() {
            sc.spawn(move || {
                let to = (rank + 1 + t as i32) % size;
                let from = (rank + size - 1 - t as i32 % size + size) % size;
                for k in 0..50u32 {
                    let msg = (k * 10 + t as u32).to_le_bytes();
                    // SAFETY: waited for below.
                    let req = unsafe { c.isend(&msg, to, 2, false) }.unwrap();
                    let mut b = [0u8; 4];
                    let st = c.recv(&mut b, ANY_SOURCE, 2).unwrap();
                    assert_eq!(st.source, from, "thread {t}");
                    assert_eq!(
                        u32::from_le_bytes(b),
                        k * 10 + t as u32,
                        "thread {t} message {k}"
                    );
                    req.wait().unwrap();
                }
            });
        }
    });
    world.barrier().unwrap();
}

/// A 1-D heat stencil over blocks of a global grid, halos exchanged with
/// the neighbours (local or remote, `PROC_NULL` at the ends): gathered at
/// rank 0, the result is bit for bit the serial computation's.
fn stencil(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    const N: usize = 1000;
    const STEPS: usize = 60;
    let init = |i: usize| ((i * 7919) % 1000) as f64 / 10.0;
    let step = |l: f64, c: f64, r: f64| c + 0.25 * (l - 2.0 * c + r);
    // Block of rank r: [lo, hi).
    let bounds = |r: i32| {
        (
            N * r as usize / size as usize,
            N * (r as usize + 1) / size as usize,
        )
    };
    let (lo, hi) = bounds(rank);
    // With halos: u[0] is lo-1, u[hi-lo+1] is hi.
    let mut u: Vec<f64> = (0..hi - lo + 2)
        .map(|k| {
            let g = (lo + k) as i64 - 1;
            if (0..N as i64).contains(&g) {
                init(g as usize)
            } else {
                0.0
            }
        })
        .collect();
    let left = if rank == 0 { PROC_NULL } else { rank - 1 };
    let right = if rank == size - 1 {
        PROC_NULL
    } else {
        rank + 1
    };
    let n = hi - lo;
    for _ in 0..STEPS {
        let (first, last) = (u[1].to_le_bytes(), u[n].to_le_bytes());
        let (mut from_left, mut from_right) = ([0u8; 8], [0u8; 8]);
        {
            // SAFETY: every request is waited for in this block.
            let rl = unsafe { world.irecv(&mut from_left, left, 60) }.unwrap();
            // SAFETY: as above.
            let rr = unsafe { world.irecv(&mut from_right, right, 61) }.unwrap();
            // SAFETY: as above.
            let sl = unsafe { world.isend(&first, left, 61, false) }.unwrap();
            // SAFETY: as above.
            let sr = unsafe { world.isend(&last, right, 60, false) }.unwrap();
            for r in [rl, rr, sl, sr] {
                r.wait().unwrap();
            }
        }
        if left != PROC_NULL {
            u[0] = f64::from_le_bytes(from_left);
        }
        if right != PROC_NULL {
            u[n + 1] = f64::from_le_bytes(from_right);
        }
        let next: Vec<f64> = (1..=n)
            .map(|k| {
                let g = lo + k - 1;
                if g == 0 || g == N - 1 {
                    u[k] // fixed boundary
                } else {
                    step(u[k - 1], u[k], u[k + 1])
                }
            })
            .collect();
        u[1..=n].copy_from_slice(&next);
    }
    let all = world.gather(&u[1..=n], 0).unwrap();
    if rank == 0 {
        let mut s: Vec<f64> = (0..N).map(init).collect();
        for _ in 0..STEPS {
            let mut t = s.clone();
            for i in 1..N - 1 {
                t[i] = step(s[i - 1], s[i], s[i + 1]);
            }
            s = t;
        }
        let all = all.unwrap();
        assert_eq!(all.len(), N);
        for i in 0..N {
            assert_eq!(all[i].to_bits(), s[i].to_bits(), "stencil point {i}");
        }
    }
    world.barrier().unwrap();
}

fn collectives(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let piece = |r: i32, salt: u32| filled(r, (r as usize * 37 + salt as usize) % 300, salt);
    for root in 0..size {
        // bcast
        let mut data = if rank == root {
            piece(root, 1)
        } else {
            vec![9; 3]
        };
        world.bcast_bytes(&mut data, root).unwrap();
        assert_eq!(data, piece(root, 1), "bcast from {root}");
        // gatherv
        let got = world.gatherv_bytes(&piece(rank, 2), root).unwrap();
        if rank == root {
            let want: Vec<Vec<u8>> = (0..size).map(|r| piece(r, 2)).collect();
            assert_eq!(got.unwrap(), want, "gatherv to {root}");
        } else {
            assert!(got.is_none());
        }
        // scatterv
        let all: Vec<Vec<u8>> = (0..size).map(|r| piece(r + root, 3)).collect();
        let mine = world
            .scatterv_bytes((rank == root).then_some(&all[..]), root)
            .unwrap();
        assert_eq!(mine, piece(rank + root, 3), "scatterv from {root}");
        // reduce: sum, and the non-commutative "first" and "last"
        let r = world.reduce(&[rank as i64, 1], |a, b| a + b, root).unwrap();
        let first = world.reduce(&[rank], |a, _| a, root).unwrap();
        let last = world.reduce(&[rank], |_, b| b, root).unwrap();
        if rank == root {
            let n = i64::from(size);
            assert_eq!(r.unwrap(), vec![n * (n - 1) / 2, n]);
            assert_eq!((first.unwrap(), last.unwrap()), (vec![0], vec![size - 1]));
        } else {
            assert!(r.is_none() && first.is_none() && last.is_none());
        }
        // typed gather and scatter
        let g = world.gather(&[rank as u32, 7], root).unwrap();
        if rank == root {
            let want: Vec<u32> = (0..size as u32).flat_map(|r| [r, 7]).collect();
            assert_eq!(g.unwrap(), want);
        }
        let src: Vec<u64> = (0..size as u64 * 2).map(|x| x * 3 + root as u64).collect();
        let s = world
            .scatter((rank == root).then_some(&src[..]), 2, root)
            .unwrap();
        assert_eq!(s, src[rank as usize * 2..rank as usize * 2 + 2]);
    }
    world.barrier().unwrap();
    // allgatherv
    let all = world.allgatherv_bytes(&piece(rank, 4)).unwrap();
    let want: Vec<Vec<u8>> = (0..size).map(|r| piece(r, 4)).collect();
    assert_eq!(all, want);
    let ag = world.all_gather(&[rank as i16, -(rank as i16)]).unwrap();
    let want: Vec<i16> = (0..size as i16).flat_map(|r| [r, -r]).collect();
    assert_eq!(ag, want);
    // allreduce against a serial fold in rank order
    let contrib = |r: i32| -> Vec<f64> { (0..5).map(|i| f64::from(r * 10 + i) * 0.5).collect() };
    let sum = world.allreduce(&contrib(rank), |a, b| a + b).unwrap();
    let mut want = contrib(0);
    for r in 1..size {
        for (w, x) in want.iter_mut().zip(contrib(r)) {
            *w += x;
        }
    }
    assert_eq!(sum, want);
    // Decimal concatenation (associative, not commutative) in rank order,
    // across nodes of several consecutive ranks each.
    let concat = |a: u64, b: u64| a * 10u64.pow(b.to_string().len() as u32) + b;
    let want: String = (1..=size).map(|r| r.to_string()).collect();
    let c = world.allreduce(&[rank as u64 + 1], concat).unwrap();
    assert_eq!(c, vec![want.parse::<u64>().unwrap()]);
    for root in 0..size {
        let c = world.reduce(&[rank as u64 + 1], concat, root).unwrap();
        assert_eq!(c.is_some(), rank == root);
        if let Some(c) = c {
            assert_eq!(c, vec![want.parse::<u64>().unwrap()]);
        }
    }
    let first = world.allreduce(&[rank], |a, _| a).unwrap();
    let last = world.allreduce(&[rank], |_, b| b).unwrap();
    assert_eq!(
        (first[0], last[0]),
        (0, size - 1),
        "rank order of the reduction"
    );
    let mx = world.allreduce(&[rank as u64 * 7 % 5], u64::max).unwrap();
    assert_eq!(mx[0], (0..size as u64).map(|r| r * 7 % 5).max().unwrap());
    // alltoallv
    let out: Vec<Vec<u8>> = (0..size)
        .map(|d| filled(rank, (rank * 3 + d) as usize, 5))
        .collect();
    let got = world.alltoallv_bytes(&out).unwrap();
    for (s, p) in got.iter().enumerate() {
        assert_eq!(
            p,
            &filled(s as i32, (s as i32 * 3 + rank) as usize, 5),
            "alltoallv from {s}"
        );
    }
    let a2a: Vec<i32> = (0..size).flat_map(|d| [rank, d]).collect();
    let got = world.all_to_all(&a2a, 2).unwrap();
    let want: Vec<i32> = (0..size).flat_map(|s| [s, rank]).collect();
    assert_eq!(got, want);
    world.barrier().unwrap();
}

/// `all_reduce_into` with predefined operations (hmpi's kernels on the
/// node, `MPI_Allreduce` among the leaders; 128-bit integers through the
/// leaders' exchange) against a serial fold, on the world and on a
/// communicator whose nodes' ranks are not consecutive; float sums
/// bit-identical on every rank and in every call; bad arguments refused.
fn predefined_reductions(world: &SpanningCommunicator) {
    use hmpi_core::op::SystemOperation as Op;
    let mixed = world
        .split(Some(0), (world.rank() % 2) * world.size() + world.rank())
        .unwrap()
        .unwrap();
    for c in [world, &mixed] {
        let (rank, size) = (world.rank(), c.size());
        // Integers: every operation that applies, 1 and 1000 elements.
        let ops = [
            Op::sum(),
            Op::product(),
            Op::max(),
            Op::min(),
            Op::logical_and(),
            Op::logical_or(),
            Op::logical_xor(),
            Op::bitwise_and(),
            Op::bitwise_or(),
            Op::bitwise_xor(),
        ];
        let v = |r: i32, n: usize| -> Vec<i64> {
            (0..n as i64)
                .map(|i| (i * 7 + i64::from(r) * 13) % 11 - 3)
                .collect()
        };
        for op in ops {
            for n in [1usize, 1000] {
                let mut got = vec![0i64; n];
                c.all_reduce_into(&v(rank, n), &mut got, op).unwrap();
                let mut want = v(0, n);
                for r in 1..world.size() {
                    for (w, x) in want.iter_mut().zip(v(r, n)) {
                        *w = match op {
                            Op::Sum => w.wrapping_add(x),
                            Op::Product => w.wrapping_mul(x),
                            Op::Max => (*w).max(x),
                            Op::Min => (*w).min(x),
                            Op::LogicalAnd => i64::from(*w != 0 && x != 0),
                            Op::LogicalOr => i64::from(*w != 0 || x != 0),
                            Op::LogicalXor => i64::from((*w != 0) != (x != 0)),
                            Op::BitwiseAnd => *w & x,
                            Op::BitwiseOr => *w | x,
                            Op::BitwiseXor => *w ^ x,
                            _ => unreachable!(),
                        };
                    }
                }
                assert_eq!(got, want, "{op:?} of {n} i64 over {size}");
            }
        }
        // Narrow and unsigned types, and 128-bit ones (no MPI datatype).
        let mut b = [0u8; 3];
        c.all_reduce_into(&[1u8, 200, rank as u8], &mut b, Op::sum())
            .unwrap();
        let n = world.size() as u32;
        let ranks: u32 = (0..n).sum();
        assert_eq!(b, [n as u8, (200 * n) as u8, ranks as u8], "u8 sums wrap");
        let mut h = [0u128; 2];
        let big = (rank as u128) << 100;
        c.all_reduce_into(&[big, 1], &mut h, Op::sum()).unwrap();
        assert_eq!(h, [(u128::from(ranks)) << 100, u128::from(n)]);
        c.all_reduce_into(&[big, rank as u128], &mut h, Op::max())
            .unwrap();
        assert_eq!(h, [u128::from(n - 1) << 100, u128::from(n - 1)]);
        // 1 MiB of f64 whose sums are exact, then inexact sums: the same
        // bits on every rank and in a second call.
        let len = (1 << 20) / 8;
        let send: Vec<f64> = (0..len)
            .map(|i| (i % 1000) as f64 + f64::from(rank))
            .collect();
        let mut got = vec![0f64; len];
        c.all_reduce_into(&send, &mut got, Op::sum()).unwrap();
        for (i, g) in got.iter().enumerate() {
            let want = (i % 1000) as f64 * f64::from(n) + f64::from(ranks);
            assert_eq!(*g, want, "element {i} of the 1 MiB f64 sum");
        }
        let send: Vec<f64> = (0..4096)
            .map(|i| 0.1 * f64::from(i) + 0.01 * f64::from(rank))
            .collect();
        let mut once = vec![0f64; send.len()];
        let mut twice = vec![0f64; send.len()];
        c.all_reduce_into(&send, &mut once, Op::sum()).unwrap();
        c.all_reduce_into(&send, &mut twice, Op::sum()).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
        assert_eq!(bits(&once), bits(&twice), "float sums differ between calls");
        let everyone = c.all_gather(&bits(&once)).unwrap();
        for (r, theirs) in everyone.chunks(send.len()).enumerate() {
            assert_eq!(theirs, &bits(&once)[..], "rank {r}'s float sums differ");
        }
        let mut mx = [0f32; 1];
        c.all_reduce_into(&[rank as f32 * -1.5], &mut mx, Op::min())
            .unwrap();
        assert_eq!(mx[0], (n - 1) as f32 * -1.5);
        // Empty vectors, and the errors (the same on every rank).
        let mut none: [u32; 0] = [];
        c.all_reduce_into(&[], &mut none, Op::sum()).unwrap();
        assert!(matches!(
            c.all_reduce_into(&[1.0f64], &mut [0.0], Op::bitwise_and()),
            Err(hmpi_core::Error::Op { .. })
        ));
        assert!(matches!(
            c.all_reduce_into(&[1u32, 2], &mut [0u32], Op::sum()),
            Err(hmpi_core::Error::Buffer { .. })
        ));
        assert!(matches!(
            c.all_reduce_into(&[1u32], &mut [0u32], Op::max_loc()),
            Err(hmpi_core::Error::Op { .. })
        ));
    }
    world.barrier().unwrap();
}

/// The serial prefix of members `0..upto` of `contrib`, combined with
/// `op` in rank order (`None` for no member).
fn serial_prefix<T: Copy>(
    upto: i32,
    contrib: impl Fn(i32) -> Vec<T>,
    op: impl Fn(T, T) -> T,
) -> Option<Vec<T>> {
    let mut acc: Option<Vec<T>> = None;
    for r in 0..upto {
        let c = contrib(r);
        acc = Some(match acc {
            None => c,
            Some(a) => a.into_iter().zip(c).map(|(x, y)| op(x, y)).collect(),
        });
    }
    acc
}

/// Scan, exscan and reduce-scatter against serial computations, with
/// sums and a non-commutative operation, on the world (nodes of
/// consecutive ranks) and on a communicator whose nodes are not.
fn scans(world: &SpanningCommunicator) {
    let concat = |a: u64, b: u64| a * 10u64.pow(b.to_string().len() as u32) + b;
    let interleaved = world
        .split(Some(0), (world.rank() % 2) * world.size() + world.rank())
        .unwrap()
        .unwrap();
    for c in [world, &interleaved] {
        let (rank, size) = (c.rank(), c.size());
        let contrib = |r: i32| -> Vec<i64> { vec![i64::from(r) * 3 - 1, 5, i64::from(r * r)] };
        let s = c.scan(&contrib(rank), |a, b| a + b).unwrap();
        assert_eq!(s, serial_prefix(rank + 1, contrib, |a, b| a + b).unwrap());
        let e = c.exscan(&contrib(rank), |a, b| a + b).unwrap();
        assert_eq!(e, serial_prefix(rank, contrib, |a, b| a + b), "exscan");
        let digits = |r: i32| vec![r as u64 + 1];
        let s = c.scan(&digits(rank), concat).unwrap();
        assert_eq!(
            s,
            serial_prefix(rank + 1, digits, concat).unwrap(),
            "scan order"
        );
        let e = c.exscan(&digits(rank), concat).unwrap();
        assert_eq!(e, serial_prefix(rank, digits, concat), "exscan order");
        // Empty contributions.
        assert_eq!(c.scan::<u8>(&[], |a, b| a + b).unwrap(), Vec::<u8>::new());
        // reduce_scatter_block: block r of the serial fold on member r.
        let k = 3usize;
        let rs = |r: i32| -> Vec<u64> {
            (0..size as u64 * k as u64)
                .map(|x| x * 7 + r as u64 + 1)
                .collect()
        };
        let got = c.reduce_scatter_block(&rs(rank), k, |a, b| a + b).unwrap();
        let full = serial_prefix(size, rs, |a, b| a + b).unwrap();
        let at = rank as usize * k;
        assert_eq!(got, full[at..at + k], "reduce_scatter_block");
        let cat = |r: i32| -> Vec<u64> { vec![r as u64 + 1; size as usize * 2] };
        let got = c.reduce_scatter_block(&cat(rank), 2, concat).unwrap();
        let full = serial_prefix(size, cat, concat).unwrap();
        assert_eq!(got, full[rank as usize * 2..rank as usize * 2 + 2]);
        // reduce_scatter with uneven counts (some empty).
        let counts: Vec<usize> = (0..size as usize).map(|r| (r * 2 + 1) % 4).collect();
        let total: usize = counts.iter().sum();
        let v = |r: i32| -> Vec<i32> { (0..total as i32).map(|x| x - r).collect() };
        let got = c.reduce_scatter(&v(rank), &counts, |a, b| a + b).unwrap();
        let full = serial_prefix(size, v, |a, b| a + b).unwrap();
        let start: usize = counts[..rank as usize].iter().sum();
        assert_eq!(got, full[start..start + counts[rank as usize]]);
        // Bad counts are errors on every member.
        assert!(c
            .reduce_scatter(&v(rank), &counts[1..], |a, b| a + b)
            .is_err());
        assert!(c
            .reduce_scatter(&v(rank)[1..], &counts, |a, b| a + b)
            .is_err());
        c.barrier().unwrap();
    }
}

/// Nonblocking collectives: several in flight at once, completed out of
/// order and by testing, each against its serial result.
fn nonblocking_collectives(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let concat = |a: u64, b: u64| a * 10u64.pow(b.to_string().len() as u32) + b;
    let want: u64 = (1..=size)
        .map(|r| r.to_string())
        .collect::<String>()
        .parse()
        .unwrap();
    let root = size - 1;
    let b = world.ibarrier().unwrap();
    let ar = world.iallreduce(vec![rank as u64 + 1], concat).unwrap();
    let red = world.ireduce(vec![rank as u64 + 1], concat, root).unwrap();
    let mut bc = world
        .ibcast_bytes(
            if rank == root {
                filled(root, 5000, 8)
            } else {
                vec![]
            },
            root,
        )
        .unwrap();
    let ag = world.iall_gather(vec![rank, -rank]).unwrap();
    let g = world.igather(vec![rank as u8], 0).unwrap();
    let src: Vec<u32> = (0..size as u32 * 2).collect();
    let sc = world
        .iscatter((rank == 0).then(|| src.clone()), 2, 0)
        .unwrap();
    let a2a = world
        .iall_to_all((0..size).flat_map(|d| [rank, d]).collect(), 2)
        .unwrap();
    let agv = world
        .iallgatherv_bytes(filled(rank, rank as usize * 11, 9))
        .unwrap();
    let gv = world.igatherv_bytes(filled(rank, 3, 10), root).unwrap();
    let pieces: Vec<Vec<u8>> = (0..size).map(|r| filled(r, r as usize + 2, 11)).collect();
    let sv = world
        .iscatterv_bytes((rank == root).then(|| pieces.clone()), root)
        .unwrap();
    let a2av = world
        .ialltoallv_bytes((0..size).map(|d| filled(rank, d as usize, 12)).collect())
        .unwrap();
    let sn = world.iscan(vec![rank as u64 + 1], concat).unwrap();
    let ex = world.iexscan(vec![rank as u64 + 1], concat).unwrap();
    let rsb = world
        .ireduce_scatter_block(vec![rank as u64 + 1; size as usize], 1, concat)
        .unwrap();
    let rs = world
        .ireduce_scatter(
            vec![1i64; size as usize * 2],
            vec![2; size as usize],
            |a, b| a + b,
        )
        .unwrap();
    // Completed in another order than started; one by testing.
    while !bc.test() {
        std::thread::yield_now();
    }
    assert_eq!(bc.wait().unwrap(), filled(root, 5000, 8));
    let digits = |r: i32| vec![r as u64 + 1];
    assert_eq!(ex.wait().unwrap(), serial_prefix(rank, digits, concat));
    assert_eq!(
        sn.wait().unwrap(),
        serial_prefix(rank + 1, digits, concat).unwrap()
    );
    assert_eq!(ar.wait().unwrap(), vec![want]);
    let r = red.wait().unwrap();
    assert_eq!(r, (rank == root).then(|| vec![want]));
    b.wait().unwrap();
    let want_ag: Vec<i32> = (0..size).flat_map(|r| [r, -r]).collect();
    assert_eq!(ag.wait().unwrap(), want_ag);
    let gathered = g.wait().unwrap();
    assert_eq!(gathered, (rank == 0).then(|| (0..size as u8).collect()));
    assert_eq!(
        sc.wait().unwrap(),
        src[rank as usize * 2..rank as usize * 2 + 2]
    );
    let want_a2a: Vec<i32> = (0..size).flat_map(|s| [s, rank]).collect();
    assert_eq!(a2a.wait().unwrap(), want_a2a);
    let want_agv: Vec<Vec<u8>> = (0..size).map(|r| filled(r, r as usize * 11, 9)).collect();
    assert_eq!(agv.wait().unwrap(), want_agv);
    let got = gv.wait().unwrap();
    if rank == root {
        let w: Vec<Vec<u8>> = (0..size).map(|r| filled(r, 3, 10)).collect();
        assert_eq!(got.unwrap(), w);
    } else {
        assert!(got.is_none());
    }
    assert_eq!(sv.wait().unwrap(), filled(rank, rank as usize + 2, 11));
    let got = a2av.wait().unwrap();
    for (s, p) in got.iter().enumerate() {
        assert_eq!(p, &filled(s as i32, rank as usize, 12));
    }
    assert_eq!(rsb.wait().unwrap(), vec![want]);
    assert_eq!(rs.wait().unwrap(), vec![i64::from(size); 2]);
    // A bad root is refused when the operation is started.
    assert!(world.ibcast_bytes(vec![], size).is_err());
    world.barrier().unwrap();
}

/// Communicators split across nodes and duplicates: ranks, isolation,
/// point-to-point and collectives inside.
fn split_and_dup(world: &SpanningCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    // Odd and even ranks, reversed by key.
    let half = world.split(Some(rank as u32 % 2), -rank).unwrap().unwrap();
    let members: Vec<i32> = (0..size).filter(|r| r % 2 == rank % 2).rev().collect();
    assert_eq!(half.size() as usize, members.len());
    assert_eq!(members[half.rank() as usize], rank);
    for (hr, &wr) in members.iter().enumerate() {
        assert_eq!(
            half.is_local(hr as i32).unwrap(),
            world.is_local(wr).unwrap()
        );
    }
    let hs = half.size();
    let hrank = half.rank();
    let to = (hrank + 1) % hs;
    let from = (hrank + hs - 1) % hs;
    let msg = filled(rank, 1000, 6);
    // SAFETY: waited for below.
    let req = unsafe { half.isend(&msg, to, 1, false) }.unwrap();
    let mut buf = vec![0u8; 1000];
    let st = half.recv(&mut buf, ANY_SOURCE, 1).unwrap();
    assert_eq!(st.source, from);
    check_filled(&buf, members[from as usize], 6, "split ring");
    req.wait().unwrap();
    let s = half.allreduce(&[rank as i64], |a, b| a + b).unwrap();
    assert_eq!(s[0], members.iter().map(|&r| i64::from(r)).sum::<i64>());
    // Even ranks first, then odd ones: a node's members are not
    // consecutive ranks, and reductions still go in rank order.
    let mixed = world
        .split(Some(0), (rank % 2) * size + rank)
        .unwrap()
        .unwrap();
    let order: Vec<i32> = (0..size)
        .filter(|r| r % 2 == 0)
        .chain((0..size).filter(|r| r % 2 == 1))
        .collect();
    assert_eq!(order[mixed.rank() as usize], rank);
    let firsts = mixed.allreduce(&[rank, rank * 2], |a, _| a).unwrap();
    assert_eq!(firsts, vec![order[0], order[0] * 2]);
    let lasts = mixed.allreduce(&[rank], |_, b| b).unwrap();
    assert_eq!(lasts, vec![order[order.len() - 1]]);
    // Decimal concatenation: associative, not commutative.
    let concat = |a: u64, b: u64| a * 10u64.pow(b.to_string().len() as u32) + b;
    for root in [0, mixed.size() - 1] {
        let r = mixed.reduce(&[rank as u64 + 1], concat, root).unwrap();
        if mixed.rank() == root {
            let want: String = order.iter().map(|r| (r + 1).to_string()).collect();
            assert_eq!(r.unwrap(), vec![want.parse::<u64>().unwrap()]);
        }
        let all = mixed.allreduce(&[rank as u64 + 1], concat).unwrap();
        let want: String = order.iter().map(|r| (r + 1).to_string()).collect();
        assert_eq!(all, vec![want.parse::<u64>().unwrap()]);
        let g = mixed.gather(&[rank], root).unwrap();
        if mixed.rank() == root {
            assert_eq!(g.unwrap(), order);
        }
    }
    // MPI_UNDEFINED: no communicator.
    let none = world.split((rank != 0).then_some(1), 0).unwrap();
    assert_eq!(none.is_none(), rank == 0);
    if let Some(c) = none {
        assert_eq!(c.size(), size - 1);
        c.barrier().unwrap();
    }
    // A duplicate's messages are not the original's.
    let dup = world.duplicate().unwrap();
    let peer = (rank + 1) % size;
    dup.send(b"d", peer, 3).unwrap();
    world.barrier().unwrap();
    assert!(world.iprobe(ANY_SOURCE, 3).unwrap().is_none());
    let mut b = [0u8; 1];
    let st = dup.recv(&mut b, ANY_SOURCE, 3).unwrap();
    assert_eq!((st.source, b[0]), ((rank + size - 1) % size, b'd'));
    world.barrier().unwrap();
}

/// A window across nodes: puts, gets, accumulates and fetch-and-ops to
/// every member (direct on the node, MPI RMA to other nodes), fences,
/// exclusive locks that serialise read-modify-writes of local and remote
/// origins, shared locks, and the errors.
fn windows(world: &SpanningCommunicator) {
    use hmpi_core::op::SystemOperation as Op;
    use hmpi_core::window::LockType;
    use multinode::SpanWindow;
    let (rank, size) = (world.rank(), world.size());
    let n = 2 * size as usize + 6;
    let (acc, fao, ctr) = (2 * size as u64, 2 * size as u64 + 2, 2 * size as u64 + 3);
    let (cas, repl) = (2 * size as u64 + 4, 2 * size as u64 + 5);
    let win = SpanWindow::<u64>::allocate(world, n).unwrap();
    assert_eq!((win.len(), win.rank(), win.size()), (n, rank, size));
    assert_eq!(win.read_local().unwrap(), vec![0; n]);
    win.fence().unwrap();
    // Every member puts its pair into its slot of every member.
    let mine = [rank as u64 * 100 + 1, rank as u64 * 100 + 2];
    for t in 0..size {
        win.put(t, &mine, 2 * rank as u64).unwrap();
        win.accumulate(t, &[1, rank as u64], acc, Op::sum())
            .unwrap();
    }
    win.fence().unwrap();
    let got = win.read_local().unwrap();
    for r in 0..size as usize {
        assert_eq!(
            got[2 * r..2 * r + 2],
            [r as u64 * 100 + 1, r as u64 * 100 + 2],
            "slot {r}"
        );
    }
    let ranks: u64 = (0..size as u64).sum();
    assert_eq!(got[acc as usize..acc as usize + 2], [size as u64, ranks]);
    // Request-based puts into the second half of every member's slot
    // pair, each rewriting what the put above wrote there, and gets of
    // another member's first half, all in flight at once.
    {
        let again: Vec<[u64; 1]> = (0..size).map(|_| [rank as u64 * 100 + 2]).collect();
        let mut firsts = vec![[0u64; 1]; size as usize];
        let mut reqs = Vec::new();
        for (t, (a, f)) in again.iter().zip(firsts.iter_mut()).enumerate() {
            let t = t as i32;
            reqs.push(win.rput(t, a, 2 * rank as u64 + 1).unwrap());
            reqs.push(win.rget(t, f, 2 * ((t + rank) % size) as u64).unwrap());
        }
        let mut first = reqs.remove(0);
        while !first.test().unwrap() {}
        for r in reqs {
            r.wait().unwrap();
        }
        for (t, f) in firsts.iter().enumerate() {
            let s = (t as i32 + rank) % size;
            assert_eq!(f[0], s as u64 * 100 + 1, "rget from {t}");
        }
        assert!(matches!(
            win.rget(size, &mut [0u64], 0),
            Err(hmpi_core::Error::Rank { .. })
        ));
    }
    win.flush_all().unwrap();
    // Gets from every member, of another member's slot.
    for t in 0..size {
        let s = (t + rank) % size;
        let mut b = [0u64; 2];
        win.get(t, &mut b, 2 * s as u64).unwrap();
        assert_eq!(b, [s as u64 * 100 + 1, s as u64 * 100 + 2], "get from {t}");
    }
    // Fetch-and-add on the last member: every old value once.
    let last = size - 1;
    let old = win.fetch_and_op(last, 1, fao, Op::sum()).unwrap();
    // The target of MPI's atomics must be in MPI until they are done.
    win.fence().unwrap();
    let mut olds = world.all_gather(&[old]).unwrap();
    olds.sort_unstable();
    assert_eq!(olds, (0..size as u64).collect::<Vec<_>>());
    // Compare-and-swap increments from every member on every member (its
    // own element too): none lost.
    for t in 0..size {
        let mut seen = 0u64;
        loop {
            let old = win.compare_and_swap(t, seen + 1, seen, cas).unwrap();
            if old == seen {
                break;
            }
            seen = old;
        }
    }
    // REPLACE into the next member, NO_OP reads back.
    let next = (rank + 1) % size;
    win.accumulate(next, &[1000 + rank as u64], repl, Op::replace())
        .unwrap();
    win.fence().unwrap();
    let got = win.read_local().unwrap();
    assert_eq!(got[cas as usize], size as u64);
    assert_eq!(got[repl as usize], 1000 + ((rank + size - 1) % size) as u64);
    // Everyone has read its element before the next member changes it.
    win.fence().unwrap();
    assert_eq!(
        win.fetch_and_op(next, 5, repl, Op::no_op()).unwrap(),
        1000 + rank as u64
    );
    assert_eq!(
        win.fetch_and_op(next, 7, repl, Op::replace()).unwrap(),
        1000 + rank as u64
    );
    win.fence().unwrap();
    assert_eq!(win.read_local().unwrap()[repl as usize], 7);
    // Get-accumulates of pairs from every member into the last one's
    // `acc` pair: each sees a distinct prefix of the sums.
    let mut before = [0u64; 2];
    win.get_accumulate(last, &[1, 10], &mut before, acc, Op::sum())
        .unwrap();
    win.fence().unwrap();
    let mut seen = world.all_gather(&[before[0]]).unwrap();
    seen.sort_unstable();
    assert_eq!(seen, (size as u64..2 * size as u64).collect::<Vec<_>>());
    let mut now = [0u64; 2];
    win.get_accumulate(last, &[0, 0], &mut now, acc, Op::no_op())
        .unwrap();
    assert_eq!(now, [2 * size as u64, ranks + 10 * size as u64]);
    assert!(matches!(
        win.get_accumulate(last, &[1], &mut [0, 0], acc, Op::sum()),
        Err(hmpi_core::Error::Buffer { .. })
    ));
    win.fence().unwrap();
    // Read-modify-writes under an exclusive lock of member 0 (a local
    // origin for some, a remote one for others) lose no increment.
    for _ in 0..5 {
        let l = win.lock(0, LockType::Exclusive).unwrap();
        assert!(matches!(
            win.lock(0, LockType::Shared),
            Err(hmpi_core::Error::RmaSync { .. })
        ));
        let mut v = [0u64];
        l.get(&mut v, ctr).unwrap();
        l.put(&[v[0] + 1], ctr).unwrap();
        l.unlock().unwrap();
    }
    win.fence().unwrap();
    {
        let l = win.lock(0, LockType::Shared).unwrap();
        let mut v = [0u64];
        l.get(&mut v, ctr).unwrap();
        assert_eq!(v[0], 5 * size as u64);
        assert_eq!(l.fetch_and_op(0, fao, Op::sum()).unwrap(), 0);
        l.flush().unwrap();
    }
    win.flush_all().unwrap();
    win.fence().unwrap();
    // Post/start/complete/wait around the ring: each member exposes
    // itself to the previous one and accesses the next one, three epochs
    // in a row (the last waited for with test).
    let (prev, next) = ((rank + size - 1) % size, (rank + 1) % size);
    let world_group = world.group();
    let of = |r: i32| world_group.incl(&[r]).unwrap();
    for epoch in 0..3u64 {
        win.post(&of(prev)).unwrap();
        win.start(&of(next)).unwrap();
        win.put(next, &[epoch * 1000 + rank as u64], ctr).unwrap();
        win.complete().unwrap();
        if epoch < 2 {
            win.wait().unwrap();
        } else {
            while !win.test().unwrap() {
                std::thread::yield_now();
            }
        }
        assert_eq!(
            win.read_local().unwrap()[ctr as usize],
            epoch * 1000 + prev as u64,
            "epoch {epoch}"
        );
    }
    assert!(matches!(
        win.complete(),
        Err(hmpi_core::Error::RmaSync { .. })
    ));
    assert!(matches!(win.wait(), Err(hmpi_core::Error::RmaSync { .. })));
    win.fence().unwrap();
    // Floats: max through MPI, from every member.
    let fw = SpanWindow::<f64>::allocate(world, 1).unwrap();
    for t in 0..size {
        fw.accumulate(t, &[f64::from(rank) * 1.5], 0, Op::max())
            .unwrap();
    }
    fw.fence().unwrap();
    assert_eq!(fw.read_local().unwrap(), vec![f64::from(last) * 1.5]);
    fw.write_local(&[-2.0]).unwrap();
    fw.fence().unwrap();
    let mut b = [0f64];
    fw.get((rank + 1) % size, &mut b, 0).unwrap();
    assert_eq!(b[0], -2.0);
    // Errors.
    let bad = |r: hmpi_core::Result<()>| r.unwrap_err();
    assert!(matches!(
        bad(win.put(0, &[1, 2], n as u64 - 1)),
        hmpi_core::Error::RmaRange { .. }
    ));
    assert!(matches!(
        bad(win.put(last, &[1], u64::MAX)),
        hmpi_core::Error::RmaRange { .. }
    ));
    assert!(matches!(
        bad(win.get(size, &mut [0], 0)),
        hmpi_core::Error::Rank { .. }
    ));
    assert!(matches!(
        bad(win.accumulate(last, &[1], 0, Op::max_loc())),
        hmpi_core::Error::Op { .. } | hmpi_core::Error::Type { .. }
    ));
    assert!(matches!(
        win.compare_and_swap(size, 1, 0, 0),
        Err(hmpi_core::Error::Rank { .. })
    ));
    assert!(matches!(
        bad(fw.accumulate(last, &[1.0], 0, Op::bitwise_or())),
        hmpi_core::Error::Op { .. }
    ));
    assert!(matches!(
        bad(fw.write_local(&[1.0, 2.0])),
        hmpi_core::Error::RmaRange { .. }
    ));
    fw.fence().unwrap();
    drop(fw);
    drop(win);
    world.barrier().unwrap();
}

/// Bad arguments are errors, not crashes.
fn errors(world: &SpanningCommunicator) {
    let size = world.size();
    assert!(matches!(
        world.send(b"x", size, 0),
        Err(hmpi_core::Error::Rank { .. })
    ));
    assert!(matches!(
        world.send(b"x", ANY_SOURCE, 0),
        Err(hmpi_core::Error::Rank { .. })
    ));
    assert!(matches!(
        world.send(b"x", 0, -5),
        Err(hmpi_core::Error::Tag { .. })
    ));
    assert!(matches!(
        world.send(b"x", 0, ANY_TAG),
        Err(hmpi_core::Error::Tag { .. })
    ));
    assert!(matches!(
        world.send(b"x", 0, world.tag_ub() + 1),
        Err(hmpi_core::Error::Tag { .. })
    ));
    let mut b = [0u8; 1];
    assert!(world.recv(&mut b, -7, 0).is_err());
    assert!(matches!(
        world.bcast_bytes(&mut vec![], size),
        Err(hmpi_core::Error::Root { .. })
    ));
    assert!(world.split(Some(u32::MAX), 0).is_err());
    assert!(world.alltoallv_bytes(&[]).is_err());
}

// ---------------------------------------------------------------------------
// The same job through the ordinary typed API only: `universe.world()`
// spans every node.

/// A 2×2 matrix (row-major) per rank: their product is associative and
/// not commutative, so a reduction combined out of rank order fails.
fn matrix(r: i32) -> [u64; 4] {
    let r = r as u64;
    [r + 2, 1, 3 * r + 1, r + 1]
}

fn mat_mul(a: &[u64; 4], b: &[u64; 4]) -> [u64; 4] {
    [
        a[0].wrapping_mul(b[0])
            .wrapping_add(a[1].wrapping_mul(b[2])),
        a[0].wrapping_mul(b[1])
            .wrapping_add(a[1].wrapping_mul(b[3])),
        a[2].wrapping_mul(b[0])
            .wrapping_add(a[3].wrapping_mul(b[2])),
        a[2].wrapping_mul(b[1])
            .wrapping_add(a[3].wrapping_mul(b[3])),
    ]
}

/// The product of the matrices of `ranks`, in order.
fn serial_product(ranks: impl Iterator<Item = i32>) -> [u64; 4] {
    ranks.fold([1, 0, 0, 1], |acc, r| mat_mul(&acc, &matrix(r)))
}

/// `inout = input · inout` per element (MPI's `inout = input op inout`).
fn product_op() -> hmpi_core::collective::UserOperation {
    hmpi_core::collective::UserOperation::typed::<[u64; 4]>(false, |a, o| {
        for (x, y) in a.iter().zip(o.iter_mut()) {
            *y = mat_mul(x, y);
        }
    })
}

fn typed_api(universe: &hmpi_core::Universe) {
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    for var in ["OMPI_COMM_WORLD_RANK", "PMI_RANK"] {
        if let Ok(v) = std::env::var(var) {
            assert_eq!(v.parse::<i32>().unwrap(), rank, "typed world rank = {var}");
        }
    }
    assert_eq!(hmpi_core::SimpleCommunicator::world().unwrap().size(), size);
    assert_eq!(world.name(), "MPI_COMM_WORLD");
    assert_eq!(world.duplicate().unwrap().name(), "");
    typed_p2p(&world);
    typed_nonblocking(&world);
    typed_collectives(&world);
    typed_immediate(&world);
    // The same on a communicator whose nodes' ranks are not consecutive
    // (even ranks first, then odd ones): reductions gather every
    // contribution there instead of combining per node first.
    let mixed = world
        .split_by_color_with_key(Some(0), (rank % 2) * size + rank)
        .unwrap()
        .unwrap();
    typed_collectives(&mixed);
    typed_immediate(&mixed);
    drop(mixed);
    typed_split(&world);
    typed_topologies(&world);
    typed_groups(&world);
    typed_ownership(&world);
    typed_errors(&world);
    world.barrier().unwrap();
}

/// Every rank sends `K` messages to rank 0 and to its neighbours; rank 0
/// takes its share from `ANY_SOURCE` (local and remote senders) with
/// several receive forms, each sender's in the order sent.
fn typed_p2p(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::collective::SystemOperation;
    const K: u64 = 6;
    let (rank, size) = (world.rank(), world.size());
    // This node's part (collective: before the synchronous sends below).
    let local = world.split_shared(0).unwrap();
    if rank != 0 {
        for k in 0..K {
            let msg = [rank as u64, k, u64::from(k % 2 == 0)];
            let p = world.process_at_rank(0);
            match k % 3 {
                0 => p.send_with_tag(&msg[..], 10 + (k % 2) as i32).unwrap(),
                1 => p
                    .synchronous_send_with_tag(&msg[..], 10 + (k % 2) as i32)
                    .unwrap(),
                _ => p.send_with_tag(&msg, 10 + (k % 2) as i32).unwrap(),
            }
        }
    } else {
        let mut next = vec![0u64; size as usize];
        let mut seen_local = false;
        let mut seen_remote = false;
        for i in 0..K * (size as u64 - 1) {
            let (msg, st) = match i % 4 {
                0 => world.any_process().receive_vec::<u64>().unwrap(),
                1 => {
                    let mut b = [0u64; 3];
                    let st = world.any_process().receive_into(&mut b[..]).unwrap();
                    (b.to_vec(), st)
                }
                2 => {
                    let st = world.any_process().probe().unwrap();
                    assert_eq!(st.count::<u64>().unwrap(), 3);
                    let (b, st2) = world
                        .process_at_rank(st.source_rank())
                        .receive_with_tag::<[u64; 3]>(st.tag())
                        .unwrap();
                    assert_eq!(st2.source_rank(), st.source_rank());
                    (b.to_vec(), st2)
                }
                _ => {
                    let (m, st) = world.any_process().matched_probe().unwrap();
                    let (b, st2) = m.matched_receive::<[u64; 3]>().unwrap();
                    assert_eq!(st2.source_rank(), st.source_rank());
                    (b.to_vec(), st2)
                }
            };
            let src = st.source_rank();
            assert_eq!(msg[0], src as u64, "the status names the sender");
            assert_eq!(msg[1], next[src as usize], "non-overtaking from {src}");
            assert_eq!(st.tag(), 10 + (msg[1] % 2) as i32);
            next[src as usize] += 1;
            // Rank 0's node holds ranks 0 .. its size (virtual nodes
            // are blocks of ranks; without them, the machine is one).
            let here = src < local.size();
            seen_local |= here;
            seen_remote |= !here;
        }
        assert!(next[1..].iter().all(|&n| n == K));
        assert_eq!(seen_remote, size > local.size());
        assert_eq!(seen_local, local.size() > 1);
        for tag in [10, 11] {
            assert!(world
                .any_process()
                .immediate_probe_with_tag(tag)
                .unwrap()
                .is_none());
        }
    }
    // Rank 0's wildcards (any tag) must see only the messages above.
    world.barrier().unwrap();
    // A ring: ANY_TAG from a known source, send_receive, PROC_NULL.
    let right = (rank + 1) % size;
    let left = (rank + size - 1) % size;
    let (v, st) = hmpi_core::point_to_point::send_receive_with_tags::<u64, _, _, _>(
        &(rank as u64 * 7),
        &world.process_at_rank(right),
        3,
        &world.process_at_rank(left),
        ANY_TAG,
    )
    .unwrap();
    assert_eq!((v, st.source_rank(), st.tag()), (left as u64 * 7, left, 3));
    world.process_at_rank(PROC_NULL).send(&1u8).unwrap();
    // Sizes up to 1 MiB between every pair of ranks 0 ↔ r, byte by byte.
    for sz in [0usize, 1, 4096, 65537, 1 << 20] {
        if rank == 0 {
            for r in 1..size {
                world
                    .process_at_rank(r)
                    .send_with_tag(&filled(0, sz, 5)[..], 4)
                    .unwrap();
                let (got, st) = world
                    .process_at_rank(r)
                    .receive_vec_with_tag::<u8>(4)
                    .unwrap();
                assert_eq!(st.byte_count() as usize, sz);
                check_filled(&got, r, 5, "typed sizes");
            }
        } else {
            let mut b = vec![0u8; sz];
            let st = world
                .process_at_rank(0)
                .receive_into_with_tag(&mut b[..], 4)
                .unwrap();
            assert_eq!(st.byte_count() as usize, sz);
            check_filled(&b, 0, 5, "typed sizes");
            world
                .process_at_rank(0)
                .send_with_tag(&filled(rank, sz, 5)[..], 4)
                .unwrap();
        }
    }
    // A longer message than the buffer is a truncation error.
    if rank == 0 {
        world
            .process_at_rank(size - 1)
            .send_with_tag(&[1u32, 2, 3][..], 8)
            .unwrap();
    }
    if rank == size - 1 {
        let mut b = [0u32; 2];
        let e = world
            .process_at_rank(0)
            .receive_into_with_tag(&mut b[..], 8);
        if local.size() == size {
            assert!(matches!(e, Err(hmpi_core::Error::Truncate { .. })), "{e:?}");
            assert_eq!(b, [1, 2]);
        } else {
            // From another node MPI reports the truncation as its error
            // (docs/multinode.md).
            assert!(e.is_err());
        }
    }
    let mut total = 0u64;
    world
        .all_reduce_into(&1u64, &mut total, SystemOperation::sum())
        .unwrap();
    assert_eq!(total, size as u64);
}

/// `immediate_*` in a scope: wildcard receives posted before the sends,
/// completed by a collection, in posting order per sender.
fn typed_nonblocking(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::request::{self, RequestCollection};
    let (rank, size) = (world.rank(), world.size());
    let n = (size - 1) as usize;
    let mut bufs = vec![[0u64; 2]; 2 * n];
    let out: Vec<[u64; 2]> = (0..2).map(|k| [rank as u64, k]).collect();
    request::scope(|scope| {
        let mut coll = RequestCollection::new();
        for b in bufs.iter_mut() {
            coll.add(
                world
                    .any_process()
                    .immediate_receive_into_with_tag(scope, b, 21)
                    .unwrap(),
            );
        }
        world.barrier().unwrap();
        let mut sends = Vec::new();
        for d in (0..size).filter(|&d| d != rank) {
            for m in &out {
                sends.push(
                    world
                        .process_at_rank(d)
                        .immediate_synchronous_send_with_tag(scope, m, 21)
                        .unwrap(),
                );
            }
        }
        let mut outcomes = Vec::new();
        coll.wait_all(&mut outcomes);
        assert_eq!(outcomes.len(), 2 * n);
        for (_, st) in &outcomes {
            assert_eq!(st.as_ref().unwrap().tag(), 21);
        }
        for s in sends {
            s.wait().unwrap();
        }
    });
    // Per sender, its first message landed in the earlier buffer.
    let mut count = vec![0u64; size as usize];
    for b in &bufs {
        assert_eq!(b[1], count[b[0] as usize], "posting order from {}", b[0]);
        count[b[0] as usize] += 1;
    }
    for (r, &c) in count.iter().enumerate() {
        assert_eq!(c, if r as i32 == rank { 0 } else { 2 });
    }
    // A cancelled wildcard receive, and a test that finishes later.
    let mut b = 0u32;
    request::scope(|scope| {
        let r = world
            .any_process()
            .immediate_receive_into_with_tag(scope, &mut b, 22)
            .unwrap();
        assert!(r.cancel());
        assert!(r.is_cancelled());
        let st = r.wait().unwrap();
        assert!(st.is_cancelled());
    });
    world.barrier().unwrap();
}

fn typed_collectives(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::collective::{Partition, PartitionMut, SystemOperation};
    let (rank, size) = (world.rank(), world.size());
    let n = size as usize;
    world.barrier().unwrap();
    for root in 0..size {
        let mut v = [0u32; 5];
        if rank == root {
            v = [root as u32, 1, 2, 3, 4];
        }
        world
            .process_at_rank(root)
            .broadcast_into(&mut v[..])
            .unwrap();
        assert_eq!(v, [root as u32, 1, 2, 3, 4]);
    }
    // Reductions against the serial rank-order definitions.
    let mut sum = [0.0f64; 2];
    let mine = [rank as f64 + 0.5, -(rank as f64)];
    world
        .all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
        .unwrap();
    let want: f64 = (0..size).map(|r| r as f64 + 0.5).sum();
    assert_eq!(sum, [want, -((0..size).sum::<i32>() as f64)]);
    // Predefined operations on numbers (MPI_Allreduce among the leaders):
    // against the serial results, a float sum the same bits on every rank.
    let mut m = [0i16; 2];
    world
        .all_reduce_into(
            &[rank as i16, -(rank as i16)][..],
            &mut m[..],
            SystemOperation::max(),
        )
        .unwrap();
    assert_eq!(m, [size as i16 - 1, 0]);
    let x = 1.0f32 / (rank as f32 + 3.0);
    let mut fs = 0.0f32;
    world
        .all_reduce_into(&x, &mut fs, SystemOperation::sum())
        .unwrap();
    let mut bits = vec![0u32; n];
    world.all_gather_into(&fs.to_bits(), &mut bits[..]).unwrap();
    assert!(
        bits.iter().all(|&b| b == fs.to_bits()),
        "float sum bits differ"
    );
    let serial: f32 = (0..size).map(|r| 1.0f32 / (r as f32 + 3.0)).sum();
    assert!(
        (fs - serial).abs() <= 1e-5 * serial.abs(),
        "{fs} vs {serial}"
    );
    let mut f = 0.0f64;
    assert!(matches!(
        world.all_reduce_into(&1.0f64, &mut f, SystemOperation::bitwise_and()),
        Err(hmpi_core::Error::Op { .. })
    ));
    let mut prod = [[0u64; 4]; 1];
    world
        .all_reduce_into(&[matrix(rank)][..], &mut prod[..], product_op())
        .unwrap();
    assert_eq!(prod[0], serial_product(0..size));
    for root in 0..size {
        let p = world.process_at_rank(root);
        if rank == root {
            let mut out = [[0u64; 4]; 1];
            p.reduce_into_root(&[matrix(rank)][..], &mut out[..], product_op())
                .unwrap();
            assert_eq!(out[0], serial_product(0..size));
        } else {
            p.reduce_into(&[matrix(rank)][..], product_op()).unwrap();
        }
    }
    let mut scan = [[0u64; 4]; 1];
    world
        .scan_into(&[matrix(rank)][..], &mut scan[..], product_op())
        .unwrap();
    assert_eq!(scan[0], serial_product(0..=rank));
    let mut ex = [[7u64; 4]; 1];
    world
        .exclusive_scan_into(&[matrix(rank)][..], &mut ex[..], product_op())
        .unwrap();
    if rank == 0 {
        assert_eq!(ex[0], [7; 4], "exscan leaves rank 0's buffer");
    } else {
        assert_eq!(ex[0], serial_product(0..rank));
    }
    let blocks: Vec<u64> = (0..n as u64 * 2).map(|i| i * 3 + rank as u64).collect();
    let mut mine_block = [0u64; 2];
    world
        .reduce_scatter_block_into(&blocks[..], &mut mine_block[..], SystemOperation::sum())
        .unwrap();
    let tot: u64 = (0..size as u64).sum();
    for (k, &x) in mine_block.iter().enumerate() {
        let i = 2 * rank as u64 + k as u64;
        assert_eq!(x, i * 3 * size as u64 + tot);
    }
    // Data movement.
    let mut all = vec![0i64; 2 * n];
    world
        .all_gather_into(&[rank as i64, -(rank as i64)][..], &mut all[..])
        .unwrap();
    for r in 0..n {
        assert_eq!(&all[2 * r..2 * r + 2], &[r as i64, -(r as i64)]);
    }
    let counts: Vec<i32> = (0..size).map(|r| r % 3).collect();
    let displs: Vec<i32> = counts
        .iter()
        .scan(0, |a, &c| Some(std::mem::replace(a, *a + c)))
        .collect();
    let total: i32 = counts.iter().sum();
    let mut var = vec![0u16; total as usize];
    let mine: Vec<u16> = (0..rank % 3).map(|k| (rank * 10 + k) as u16).collect();
    world
        .all_gather_varcount_into(
            &mine[..],
            &mut PartitionMut::new(&mut var[..], &counts[..], &displs[..]),
        )
        .unwrap();
    for r in 0..size {
        for k in 0..r % 3 {
            assert_eq!(var[(displs[r as usize] + k) as usize], (r * 10 + k) as u16);
        }
    }
    let send: Vec<u32> = (0..n as u32).map(|d| rank as u32 * 100 + d).collect();
    let mut recv = vec![0u32; n];
    world.all_to_all_into(&send[..], &mut recv[..]).unwrap();
    for (r, &x) in recv.iter().enumerate() {
        assert_eq!(x, r as u32 * 100 + rank as u32);
    }
    // all_to_all_varcount: rank s sends d+1 values to rank d.
    let sc: Vec<i32> = (0..size).map(|d| d + 1).collect();
    let sd: Vec<i32> = sc
        .iter()
        .scan(0, |a, &c| Some(std::mem::replace(a, *a + c)))
        .collect();
    let sendv: Vec<u32> = (0..size)
        .flat_map(|d| (0..=d).map(move |k| (rank * 1000 + d * 10 + k) as u32))
        .collect();
    let rc: Vec<i32> = vec![rank + 1; n];
    let rd: Vec<i32> = (0..size).map(|s| s * (rank + 1)).collect();
    let mut recvv = vec![0u32; n * (rank as usize + 1)];
    world
        .all_to_all_varcount_into(
            &Partition::new(&sendv[..], &sc[..], &sd[..]),
            &mut PartitionMut::new(&mut recvv[..], &rc[..], &rd[..]),
        )
        .unwrap();
    for s in 0..size {
        for k in 0..=rank {
            let got = recvv[(s * (rank + 1) + k) as usize];
            assert_eq!(got, (s * 1000 + rank * 10 + k) as u32);
        }
    }
    for root in 0..size {
        let p = world.process_at_rank(root);
        let mine = [rank as u8, 0xa5];
        if rank == root {
            let mut g = vec![0u8; 2 * n];
            p.gather_into_root(&mine[..], &mut g[..]).unwrap();
            for r in 0..n {
                assert_eq!(&g[2 * r..2 * r + 2], &[r as u8, 0xa5]);
            }
            let pieces: Vec<u64> = (0..n as u64).map(|r| r * r + root as u64).collect();
            let mut one = 0u64;
            p.scatter_into_root(&pieces[..], &mut one).unwrap();
            assert_eq!(one, (rank * rank + root) as u64);
            let mut gv = vec![0u16; total as usize];
            let mv: Vec<u16> = (0..rank % 3).map(|k| (rank * 10 + k) as u16).collect();
            p.gather_varcount_into_root(
                &mv[..],
                &mut PartitionMut::new(&mut gv[..], &counts[..], &displs[..]),
            )
            .unwrap();
            assert_eq!(gv, var);
            let mut sv = vec![0u16; (rank % 3) as usize];
            p.scatter_varcount_into_root(
                &Partition::new(&var[..], &counts[..], &displs[..]),
                &mut sv[..],
            )
            .unwrap();
            assert_eq!(sv, mv);
        } else {
            p.gather_into(&mine[..]).unwrap();
            let mut one = 0u64;
            p.scatter_into(&mut one).unwrap();
            assert_eq!(one, (rank * rank + root) as u64);
            let mv: Vec<u16> = (0..rank % 3).map(|k| (rank * 10 + k) as u16).collect();
            p.gather_varcount_into(&mv[..]).unwrap();
            let mut sv = vec![0u16; (rank % 3) as usize];
            p.scatter_varcount_into(&mut sv[..]).unwrap();
            assert_eq!(sv, mv);
        }
    }
}

/// The typed API's nonblocking collectives across nodes: every
/// `immediate_*` form started in one scope, all in flight at once, one
/// completed by testing, the others waited for in the reverse order and
/// one left to the scope's end, each against its serial definition
/// (reductions with a non-commutative user operation). The buffers are
/// borrowed by the scope; completion writes the receive buffers.
fn typed_immediate(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::collective::{ImmediateCollectives, ImmediateRoot, Partition, PartitionMut};
    let (rank, size) = (world.rank(), world.size());
    let n = size as usize;
    let (root, root2) = (size - 1, 0);
    let counts: Vec<i32> = (0..size).map(|r| r % 3).collect();
    let displs: Vec<i32> = counts
        .iter()
        .scan(0, |a, &c| Some(std::mem::replace(a, *a + c)))
        .collect();
    let total = counts.iter().sum::<i32>() as usize;
    let var_of = |r: i32| -> Vec<u16> { (0..r % 3).map(|k| (r * 10 + k) as u16).collect() };
    let var_all: Vec<u16> = (0..size).flat_map(var_of).collect();
    let mine_v = var_of(rank);

    let mut bc = [0u32; 5];
    if rank == root {
        bc = [root as u32, 1, 2, 3, 4];
    }
    let mine_m = [matrix(rank)];
    let mut ar = [[0u64; 4]; 1];
    let mut left = [[0u64; 4]; 1];
    let mut rd = [[0u64; 4]; 1];
    let mut sc = [[0u64; 4]; 1];
    let mut ex = [[7u64; 4]; 1];
    let blocks: Vec<[u64; 4]> = (0..n as i32).map(|b| matrix(rank + b)).collect();
    let mut rsb = [[0u64; 4]; 1];
    let pair = [rank as i64, -(rank as i64)];
    let mut ag = vec![0i64; 2 * n];
    let mut agv = vec![0u16; total];
    let a2a_send: Vec<u32> = (0..n as u32).map(|d| rank as u32 * 100 + d).collect();
    let mut a2a = vec![0u32; n];
    let sc2: Vec<i32> = (0..size).map(|d| d + 1).collect();
    let sd2: Vec<i32> = sc2
        .iter()
        .scan(0, |a, &c| Some(std::mem::replace(a, *a + c)))
        .collect();
    let a2av_send: Vec<u32> = (0..size)
        .flat_map(|d| (0..=d).map(move |k| (rank * 1000 + d * 10 + k) as u32))
        .collect();
    let rc2: Vec<i32> = vec![rank + 1; n];
    let rd2: Vec<i32> = (0..size).map(|s| s * (rank + 1)).collect();
    let mut a2av = vec![0u32; n * (rank as usize + 1)];
    let gmine = [rank as u8, 0xa5];
    let mut g = vec![0u8; 2 * n];
    let mut gv = vec![0u16; total];
    let pieces: Vec<u64> = (0..n as u64).map(|r| r * r + root as u64).collect();
    let mut one = 0u64;
    let mut sv = vec![0u16; (rank % 3) as usize];
    // The partitions live as long as the buffers they borrow, beyond the
    // scope.
    let mut agv_part = PartitionMut::new(&mut agv[..], &counts[..], &displs[..]);
    let send_part = Partition::new(&a2av_send[..], &sc2[..], &sd2[..]);
    let mut recv_part = PartitionMut::new(&mut a2av[..], &rc2[..], &rd2[..]);
    let mut gv_part = PartitionMut::new(&mut gv[..], &counts[..], &displs[..]);
    let sv_part = Partition::new(&var_all[..], &counts[..], &displs[..]);

    hmpi_core::request::scope(|scope| {
        let p = world.process_at_rank(root);
        let p2 = world.process_at_rank(root2);
        let at_root = rank == root;
        let mut reqs = vec![
            world.immediate_barrier(scope).unwrap(),
            p.immediate_broadcast_into(scope, &mut bc[..]).unwrap(),
            world
                .immediate_all_reduce_into(scope, &mine_m[..], &mut ar[..], product_op())
                .unwrap(),
        ];
        reqs.push(if rank == root2 {
            p2.immediate_reduce_into_root(scope, &mine_m[..], &mut rd[..], product_op())
                .unwrap()
        } else {
            p2.immediate_reduce_into(scope, &mine_m[..], product_op())
                .unwrap()
        });
        reqs.push(
            world
                .immediate_scan_into(scope, &mine_m[..], &mut sc[..], product_op())
                .unwrap(),
        );
        reqs.push(
            world
                .immediate_exclusive_scan_into(scope, &mine_m[..], &mut ex[..], product_op())
                .unwrap(),
        );
        reqs.push(
            world
                .immediate_reduce_scatter_block_into(scope, &blocks[..], &mut rsb[..], product_op())
                .unwrap(),
        );
        reqs.push(
            world
                .immediate_all_gather_into(scope, &pair[..], &mut ag[..])
                .unwrap(),
        );
        reqs.push(
            world
                .immediate_all_gather_varcount_into(scope, &mine_v[..], &mut agv_part)
                .unwrap(),
        );
        reqs.push(
            world
                .immediate_all_to_all_into(scope, &a2a_send[..], &mut a2a[..])
                .unwrap(),
        );
        reqs.push(
            world
                .immediate_all_to_all_varcount_into(scope, &send_part, &mut recv_part)
                .unwrap(),
        );
        if at_root {
            reqs.push(
                p.immediate_gather_into_root(scope, &gmine[..], &mut g[..])
                    .unwrap(),
            );
            reqs.push(
                p.immediate_gather_varcount_into_root(scope, &mine_v[..], &mut gv_part)
                    .unwrap(),
            );
            reqs.push(
                p.immediate_scatter_into_root(scope, &pieces[..], &mut one)
                    .unwrap(),
            );
            reqs.push(
                p.immediate_scatter_varcount_into_root(scope, &sv_part, &mut sv[..])
                    .unwrap(),
            );
        } else {
            reqs.push(p.immediate_gather_into(scope, &gmine[..]).unwrap());
            reqs.push(
                p.immediate_gather_varcount_into(scope, &mine_v[..])
                    .unwrap(),
            );
            reqs.push(p.immediate_scatter_into(scope, &mut one).unwrap());
            reqs.push(
                p.immediate_scatter_varcount_into(scope, &mut sv[..])
                    .unwrap(),
            );
        }
        // Left to the scope's end.
        std::mem::forget(
            world
                .immediate_all_reduce_into(scope, &mine_m[..], &mut left[..], product_op())
                .unwrap(),
        );
        // The first by testing, the others in the reverse order.
        let mut first = reqs.remove(0);
        loop {
            if let Some(r) = first.test() {
                r.unwrap();
                break;
            }
            std::thread::yield_now();
        }
        while let Some(r) = reqs.pop() {
            r.wait().unwrap();
        }
    });
    assert_eq!(bc, [root as u32, 1, 2, 3, 4]);
    assert_eq!(ar[0], serial_product(0..size));
    assert_eq!(left[0], serial_product(0..size));
    if rank == root2 {
        assert_eq!(rd[0], serial_product(0..size));
    }
    assert_eq!(sc[0], serial_product(0..=rank));
    if rank == 0 {
        assert_eq!(ex[0], [7; 4], "exscan leaves rank 0's buffer");
    } else {
        assert_eq!(ex[0], serial_product(0..rank));
    }
    // Block `rank` of the product: the product of the members' blocks `rank`.
    let want = (0..size).fold([1, 0, 0, 1], |acc, r| mat_mul(&acc, &matrix(r + rank)));
    assert_eq!(rsb[0], want);
    for r in 0..n {
        assert_eq!(&ag[2 * r..2 * r + 2], &[r as i64, -(r as i64)]);
    }
    assert_eq!(agv, var_all);
    for (r, &x) in a2a.iter().enumerate() {
        assert_eq!(x, r as u32 * 100 + rank as u32);
    }
    for s in 0..size {
        for k in 0..=rank {
            assert_eq!(
                a2av[(s * (rank + 1) + k) as usize],
                (s * 1000 + rank * 10 + k) as u32
            );
        }
    }
    if rank == root {
        for r in 0..n {
            assert_eq!(&g[2 * r..2 * r + 2], &[r as u8, 0xa5]);
        }
        assert_eq!(gv, var_all);
    }
    assert_eq!(one, (rank * rank + root) as u64);
    assert_eq!(sv, mine_v);
    // Errors when started: a buffer that does not split over the ranks.
    let mut odd = vec![0i64; 2 * n + 1];
    hmpi_core::request::scope(|scope| {
        assert!(world
            .immediate_all_gather_into(scope, &pair[..], &mut odd[..])
            .is_err());
    });
    world.barrier().unwrap();
}

/// Splits across nodes (the parity of the rank, so each part has members
/// on several nodes), keys reversed; a duplicate keeps its messages apart.
fn typed_split(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::collective::SystemOperation;
    let (rank, size) = (world.rank(), world.size());
    let half = world
        .split_by_color_with_key(Some((rank % 2) as u32), -rank)
        .unwrap()
        .unwrap();
    let members: Vec<i32> = (0..size).rev().filter(|r| r % 2 == rank % 2).collect();
    assert_eq!(half.size() as usize, members.len());
    assert_eq!(members[half.rank() as usize], rank);
    assert!(half.spans_nodes());
    // Who is who: an all-gather of the world ranks, in the part's order.
    let mut got = vec![0i32; members.len()];
    half.all_gather_into(&rank, &mut got[..]).unwrap();
    assert_eq!(got, members);
    // A ring in the part, through both paths.
    let (hr, hs) = (half.rank(), half.size());
    let (v, st) = hmpi_core::point_to_point::send_receive::<i32, _, _, _>(
        &rank,
        &half.process_at_rank((hr + 1) % hs),
        &half.process_at_rank((hr + hs - 1) % hs),
    )
    .unwrap();
    assert_eq!(st.source_rank(), (hr + hs - 1) % hs);
    assert_eq!(v, members[((hr + hs - 1) % hs) as usize]);
    let mut s = 0i64;
    half.all_reduce_into(&i64::from(rank), &mut s, SystemOperation::sum())
        .unwrap();
    assert_eq!(s, members.iter().map(|&r| i64::from(r)).sum::<i64>());
    // MPI_UNDEFINED.
    let none = world
        .split_by_color(if rank == 0 { None } else { Some(0) })
        .unwrap();
    assert_eq!(none.is_none(), rank == 0);
    if let Some(c) = none {
        assert_eq!((c.size(), c.rank()), (size - 1, rank - 1));
        c.barrier().unwrap();
    }
    // A duplicate: a message on it is not seen on the world.
    let dup = world.duplicate().unwrap();
    assert_eq!((dup.rank(), dup.size()), (rank, size));
    let to = (rank + 1) % size;
    dup.process_at_rank(to).send_with_tag(&9u8, 1).unwrap();
    dup.barrier().unwrap();
    assert!(world.any_process().immediate_probe().unwrap().is_none());
    let (x, st) = dup.any_process().receive::<u8>().unwrap();
    assert_eq!((x, st.source_rank()), (9, (rank + size - 1) % size));
    world.barrier().unwrap();
}

/// Process topologies over every node and their neighbourhood
/// collectives, blocking and nonblocking, against what each neighbour
/// sent: a periodic ring (where 2 ranks are each other's neighbour twice),
/// a 2-D grid with `PROC_NULL` edges, its duplicate and a sub-grid, a
/// distributed graph with blocks of different lengths, a derived
/// datatype, and a length mismatch reported to the receiver only.
fn typed_topologies(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::collective::neighbor::{neighbor_alltoallw, Block};
    use hmpi_core::collective::raw::Mode;
    use hmpi_core::collective::{NeighborCollectives, PartitionMut};
    use hmpi_core::datatype::{BasicType, Datatype, UserDatatype};
    use hmpi_core::topology::{dims_create, TopologyCommunicator, TopologyKind};
    let (rank, size) = (world.rank(), world.size());
    let spans = world.spans_nodes();

    // A ring: block 0 from below, block 1 from above.
    let ring = world
        .create_cartesian_communicator(&[size], &[true], false)
        .unwrap()
        .unwrap();
    assert_eq!(ring.as_simple().spans_nodes(), spans);
    assert_eq!((ring.rank(), ring.size()), (rank, size));
    let (below, above) = ((rank + size - 1) % size, (rank + 1) % size);
    assert_eq!(ring.shift(0, 1).unwrap(), (Some(below), Some(above)));
    assert_eq!(ring.rank_to_coordinates(rank).unwrap(), vec![rank]);
    let mine = [rank, rank * 10];
    let from_ring = [below, below * 10, above, above * 10];
    let check_ring = |what: &str| {
        let mut got = [-1; 4];
        ring.neighbor_all_gather_into(&mine[..], &mut got[..])
            .unwrap();
        assert_eq!(got, from_ring, "{what}");
    };
    check_ring("ring allgather");
    let send = [rank * 100, rank * 100 + 1]; // to below, to above
    let mut got = [-1; 2];
    ring.neighbor_all_to_all_into(&send[..], &mut got[..])
        .unwrap();
    assert_eq!(got, [below * 100 + 1, above * 100], "ring alltoall");

    // A grid without wrap-around: missing neighbours leave their blocks.
    let mut dims = [0, 0];
    dims_create(size, &mut dims).unwrap();
    let grid = world
        .create_cartesian_communicator(&dims, &[false, false], false)
        .unwrap()
        .unwrap();
    let me = grid.rank_to_coordinates(grid.rank()).unwrap();
    let at = |c: [i32; 2]| -> Option<i32> {
        ((0..dims[0]).contains(&c[0]) && (0..dims[1]).contains(&c[1]))
            .then(|| grid.coordinates_to_rank(&c).unwrap())
    };
    let want: Vec<i64> = [
        [me[0] - 1, me[1]],
        [me[0] + 1, me[1]],
        [me[0], me[1] - 1],
        [me[0], me[1] + 1],
    ]
    .iter()
    .map(|&c| at(c).map_or(-7, |r| i64::from(r) * 3))
    .collect();
    let check_grid = |g: &hmpi_core::topology::CartesianCommunicator| {
        let mut got = vec![-7i64; 4];
        g.neighbor_all_gather_into(&(i64::from(g.rank()) * 3), &mut got[..])
            .unwrap();
        assert_eq!(got, want, "grid allgather at {me:?}");
    };
    check_grid(&grid);
    let dup = grid.duplicate().unwrap();
    assert_eq!(dup.topology_kind(), Some(TopologyKind::Cartesian));
    let dup = hmpi_core::topology::CartesianCommunicator::from_communicator(dup).unwrap();
    check_grid(&dup);
    // The rows: one neighbour on each side along the kept dimension.
    let row = grid.subgroup(&[false, true]).unwrap();
    assert_eq!(row.size(), dims[1]);
    let mut got = [-1i32; 2];
    row.neighbor_all_gather_into(&grid.rank(), &mut got[..])
        .unwrap();
    let along = |d: i32| at([me[0], me[1] + d]).unwrap_or(-1);
    assert_eq!(got, [along(-1), along(1)], "sub-grid allgather");

    // Two nonblocking ones in flight at once, with a blocking one between.
    let mut g1 = [-1; 4];
    let mut g2 = [-1; 2];
    let mut g3 = [-1; 4];
    hmpi_core::request::scope(|scope| {
        let r1 = ring
            .immediate_neighbor_all_gather_into(scope, &mine[..], &mut g1[..])
            .unwrap();
        let r2 = ring
            .immediate_neighbor_all_to_all_into(scope, &send[..], &mut g2[..])
            .unwrap();
        ring.neighbor_all_gather_into(&mine[..], &mut g3[..])
            .unwrap();
        r2.wait().unwrap();
        r1.wait().unwrap();
    });
    assert_eq!(g1, from_ring, "immediate allgather");
    assert_eq!(g2, [below * 100 + 1, above * 100], "immediate alltoall");
    assert_eq!(g3, g1, "blocking between immediate ones");

    // A distributed graph: r sends (r + d) % 3 + 1 values to r + 1 and r + 2.
    let n = size;
    let outs = [(rank + 1) % n, (rank + 2) % n];
    let ins = [(rank + n - 1) % n, (rank + n - 2) % n];
    let graph = world
        .create_dist_graph_communicator_adjacent(&ins, None, &outs, None, false)
        .unwrap();
    let len = |s: i32, d: i32| (s + d) % 3 + 1;
    let value = |s: i32, d: i32, i: i32| s * 1000 + d * 10 + i;
    let scounts: Vec<i32> = outs.iter().map(|&d| len(rank, d)).collect();
    let sdispls = [0, scounts[0]];
    let sendv: Vec<i32> = outs
        .iter()
        .flat_map(|&d| (0..len(rank, d)).map(move |i| value(rank, d, i)))
        .collect();
    let rcounts: Vec<i32> = ins.iter().map(|&s| len(s, rank)).collect();
    let rdispls = [0, rcounts[0]];
    let mut recvv = vec![-1; (rcounts[0] + rcounts[1]) as usize];
    {
        let sp = hmpi_core::collective::Partition::new(&sendv[..], &scounts[..], &sdispls[..]);
        let mut rp = PartitionMut::new(&mut recvv[..], &rcounts[..], &rdispls[..]);
        graph
            .neighbor_all_to_all_varcount_into(&sp, &mut rp)
            .unwrap();
    }
    let wantv: Vec<i32> = ins
        .iter()
        .flat_map(|&s| (0..len(s, rank)).map(move |i| value(s, rank, i)))
        .collect();
    assert_eq!(recvv, wantv, "graph alltoallv");

    // A derived datatype on both sides (every other i32), on the ring.
    let int = Datatype::basic(BasicType::I32);
    let evens: Datatype = UserDatatype::vector(3, 1, 2, &int).unwrap().into();
    let sendw: Vec<i32> = (0..12).map(|i| rank * 100 + i).collect();
    let mut recvw = vec![-1i32; 12];
    let sb = [
        Block {
            count: 1,
            disp: 0,
            dt: &evens,
        },
        Block {
            count: 1,
            disp: 24,
            dt: &evens,
        },
    ];
    // SAFETY: each block (3 ints 8 bytes apart from its displacement)
    // lies in its 12-element buffer, borrowed for the call.
    unsafe {
        neighbor_alltoallw(
            ring.as_simple(),
            sendw.as_ptr().cast(),
            &sb,
            recvw.as_mut_ptr().cast(),
            &sb,
            Mode::Block,
        )
        .unwrap();
    }
    // Block 0 (even slots 0..6) holds below's block 1 (its slots 6, 8,
    // 10); block 1 (even slots 6..12) above's block 0 (slots 0, 2, 4).
    let mut wantw = vec![-1i32; 12];
    for j in 0..3 {
        wantw[2 * j] = below * 100 + 6 + 2 * j as i32;
        wantw[6 + 2 * j] = above * 100 + 2 * j as i32;
    }
    assert_eq!(recvw, wantw, "derived datatype");

    // Rank 0 sends one value too many to its upper neighbour: only that
    // neighbour's call fails, and the ring keeps working after it.
    let extra = [rank; 3];
    let mut lens = [1, 1];
    if rank == 0 {
        lens[1] = 2;
    }
    let sp = hmpi_core::collective::Partition::new(&extra[..], &lens[..], &[0, 1][..]);
    let mut small = [-1i32; 2];
    let r = {
        let mut rp = PartitionMut::new(&mut small[..], &[1, 1][..], &[0, 1][..]);
        ring.neighbor_all_to_all_varcount_into(&sp, &mut rp)
    };
    if size > 1 && rank == 1 {
        assert!(matches!(r, Err(hmpi_core::Error::Arg { .. })), "{r:?}");
    } else if size > 1 {
        r.unwrap();
    }
    check_ring("after an error");
    // Without a topology: refused on every member alike.
    assert!(matches!(
        world.neighbor_all_gather_into(&rank, &mut got[..]),
        Err(hmpi_core::Error::Topology { .. })
    ));
    world.barrier().unwrap();
}

/// Groups name processes by MPI world rank on every communicator, the
/// node-local ones included, and make communicators across nodes
/// (`MPI_Comm_create`), disjoint groups each their own.
fn typed_groups(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::collective::SystemOperation;
    use hmpi_core::GroupRelation;
    let (rank, size) = (world.rank(), world.size());
    let all = world.group();
    assert_eq!(all.world_ranks(), &(0..size).collect::<Vec<_>>()[..]);
    assert_eq!((all.size(), all.rank()), (size, Some(rank)));
    assert_eq!(
        world.duplicate().unwrap().group().compare(&all),
        GroupRelation::Identical
    );
    // A part in reverse order: its group lists its members' world ranks.
    let half = world
        .split_by_color_with_key(Some((rank % 2) as u32), -rank)
        .unwrap()
        .unwrap();
    let members: Vec<i32> = (0..size).rev().filter(|r| r % 2 == rank % 2).collect();
    assert_eq!(half.group().world_ranks(), &members[..]);
    assert_eq!(half.group().rank(), Some(half.rank()));
    // The node's communicator names the same processes the same way.
    let node = world.split_shared(0);
    let node = node.unwrap();
    let mut on_node = vec![0i32; node.size() as usize];
    node.all_gather_into(&rank, &mut on_node[..]).unwrap();
    let ng = node.group();
    assert_eq!(ng.world_ranks(), &on_node[..], "node group by world rank");
    assert_eq!(ng.rank(), Some(node.rank()));
    let ranks: Vec<i32> = (0..ng.size()).collect();
    let there = ng.translate_ranks(&ranks, &all).unwrap();
    assert_eq!(there, on_node.iter().map(|&r| Some(r)).collect::<Vec<_>>());
    assert_eq!(ng.intersection(&all).compare(&ng), GroupRelation::Identical);
    // A communicator of a subgroup of the node's group, made on the node.
    let first = ng.incl(&[0]).unwrap();
    let solo = node.split_by_subgroup_collective(&first).unwrap();
    assert_eq!(solo.is_some(), node.rank() == 0);
    if let Some(c) = solo {
        assert_eq!((c.size(), c.group().world_ranks()), (1, &on_node[..1]));
    }
    // A process of another node is refused there, on every member alike.
    if let Some(far) = (0..size).find(|r| !on_node.contains(r)) {
        let g = all.incl(&[far]).unwrap();
        assert!(matches!(
            node.split_by_subgroup_collective(&g),
            Err(hmpi_core::Error::Group { .. })
        ));
    }
    // The world's even ranks, last first: a communicator across nodes in
    // the group's order; the others get none.
    let evens: Vec<i32> = (0..size).filter(|r| r % 2 == 0).rev().collect();
    let g = all.incl(&evens).unwrap();
    let c = world.split_by_subgroup_collective(&g).unwrap();
    assert_eq!(c.is_some(), rank % 2 == 0);
    if let Some(c) = &c {
        assert_eq!(c.size() as usize, evens.len());
        assert_eq!(evens[c.rank() as usize], rank);
        assert_eq!(c.group().world_ranks(), &evens[..]);
        let mut sum = 0i32;
        c.all_reduce_into(&rank, &mut sum, SystemOperation::sum())
            .unwrap();
        assert_eq!(sum, evens.iter().sum::<i32>());
    }
    // Disjoint groups at once: each side its own communicator.
    let mine: Vec<i32> = (0..size).filter(|r| r % 2 == rank % 2).collect();
    let c = world
        .split_by_subgroup_collective(&all.incl(&mine).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(c.group().world_ranks(), &mine[..]);
    let mut got = vec![0i32; mine.len()];
    c.all_gather_into(&rank, &mut got[..]).unwrap();
    assert_eq!(got, mine);
    // A rank outside the communicator is refused.
    let outside = hmpi_core::Group::from_world_ranks(vec![size + 3], rank).unwrap();
    assert!(matches!(
        world.split_by_subgroup_collective(&outside),
        Err(hmpi_core::Error::Group { .. })
    ));
    world.barrier().unwrap();
}

fn typed_errors(world: &hmpi_core::SimpleCommunicator) {
    let size = world.size();
    assert!(matches!(
        world.process_at_rank(size).send(&1u8),
        Err(hmpi_core::Error::Rank { .. })
    ));
    assert!(matches!(
        world.process_at_rank(0).send_with_tag(&1u8, -5),
        Err(hmpi_core::Error::Tag { .. })
    ));
    // The raw tier (but for its blocking give and take) and the layers
    // without a spanning form refuse it.
    assert!(hmpi_core::raw::send(world, b"x", 0, 0).is_err());
    // A node-local window over a communicator spanning nodes would name
    // other nodes' memory by this node's addresses: refused everywhere.
    let w = hmpi_core::window::Win::allocate(world, 64, 1);
    assert!(matches!(w, Err(hmpi_core::Error::Comm { .. })), "{w:?}");
    // Pieces that do not fit the buffers are errors, not panics.
    let mut small = [0u32; 1];
    assert!(world
        .all_gather_into(&[1u32, 2][..], &mut small[..])
        .is_err());
}

/// Ownership passing through the raw tier's blocking give and take (what
/// opi calls) on the spanning world: on the node the block itself with its
/// `meta` words, to another node its bytes (send + free, allocate +
/// receive).
fn typed_ownership(world: &hmpi_core::SimpleCommunicator) {
    use hmpi_core::raw::{self, OwnedBlock, Traffic};
    let (rank, size) = (world.rank(), world.size());
    for d in 1..size {
        let to = (rank + d) % size;
        let from = (rank + size - d) % size;
        // Virtual nodes are blocks of ranks; without them, one machine.
        let nodes: i64 = std::env::var(multinode::NODES_VAR).map_or(1, |v| v.parse().unwrap());
        let node_of = |r: i32| i64::from(r) * nodes / i64::from(size);
        assert_eq!(world.shares_heap_with(to), node_of(to) == node_of(rank));
        for n in [0usize, 3, 1 << 15] {
            let v: Vec<u64> = (0..n as u64).map(|i| i * 7 + rank as u64).collect();
            let mut b = OwnedBlock::from_vec(v);
            b.meta = [11, 12, 13, rank as u64];
            let mut out = None;
            let mut st = raw::Status::empty();
            // A give to another node returns once MPI has sent the bytes
            // (as MPI_Send): in each cycle of the pattern the rank whose
            // destination is lower takes first, so no cycle waits on itself.
            let give = |b| {
                // SAFETY: a vector's block of the global allocator, given up.
                unsafe { raw::give(world, Traffic::PointToPoint, b, to, 60) }.unwrap()
            };
            if to < rank {
                raw::recv_owned_into(world, Traffic::PointToPoint, &mut out, 8, from, 60, &mut st)
                    .unwrap();
                give(b);
            } else {
                give(b);
                raw::recv_owned_into(world, Traffic::PointToPoint, &mut out, 8, from, 60, &mut st)
                    .unwrap();
            }
            assert_eq!((st.source, st.count), (from, 8 * n as u64));
            let block = out.expect("a block");
            let want_meta = if world.shares_heap_with(from) {
                [11, 12, 13, from as u64]
            } else {
                [0; 4]
            };
            assert_eq!(block.meta, want_meta, "meta from {from}");
            // SAFETY: the block is ours, of u64s written by the sender.
            let got: Vec<u64> = unsafe { block.into_vec() }.expect("a block of u64s");
            assert_eq!(got.len(), n);
            for (i, &x) in got.iter().enumerate() {
                assert_eq!(x, i as u64 * 7 + from as u64, "element {i} from {from}");
            }
        }
    }
    // The nonblocking forms in a scope: every rank gives to every distance
    // at once, then takes from every distance; on the node the block
    // itself, to another node MPI's send of its bytes (the request
    // completing, the block freed, when the send has) and a fresh block
    // received once the message matched (allocate + receive).
    for n in [0usize, 5, 1 << 17] {
        let mut slots: Vec<Option<OwnedBlock>> = (1..size).map(|_| None).collect();
        hmpi_core::request::scope(|scope| {
            let mut gives = Vec::new();
            for d in 1..size {
                let to = (rank + d) % size;
                let v: Vec<u64> = (0..n as u64)
                    .map(|i| i * 5 + (rank * 100 + d) as u64)
                    .collect();
                let mut b = OwnedBlock::from_vec(v);
                b.meta = [21, 22, 23, rank as u64];
                // SAFETY: a vector's block of the global allocator, given up.
                gives.push(
                    unsafe { scope.start_give(world, Traffic::PointToPoint, b, to, 70 + d) }
                        .unwrap(),
                );
            }
            let mut takes = Vec::new();
            for (k, slot) in slots.iter_mut().enumerate() {
                let d = k as i32 + 1;
                let from = (rank + size - d) % size;
                takes.push(scope.start_take(world, slot, 8, from, 70 + d).unwrap());
            }
            for (k, t) in takes.into_iter().enumerate() {
                let d = k as i32 + 1;
                let st = t.wait().unwrap();
                assert_eq!(st.source_rank(), (rank + size - d) % size);
                assert_eq!(st.count::<u8>().unwrap(), 8 * n);
            }
            for g in gives {
                g.wait().unwrap();
            }
        });
        for (k, slot) in slots.into_iter().enumerate() {
            let d = k as i32 + 1;
            let from = (rank + size - d) % size;
            let block = slot.expect("a block");
            let want_meta = if world.shares_heap_with(from) {
                [21, 22, 23, from as u64]
            } else {
                [0; 4]
            };
            assert_eq!(block.meta, want_meta, "meta from {from}");
            // SAFETY: the block is ours, of u64s written by the sender.
            let got: Vec<u64> = unsafe { block.into_vec() }.expect("a block of u64s");
            assert_eq!(got.len(), n);
            for (i, &x) in got.iter().enumerate() {
                assert_eq!(
                    x,
                    i as u64 * 5 + (from * 100 + d) as u64,
                    "element {i} from {from}"
                );
            }
        }
    }
    // A nonblocking take from ANY_SOURCE is refused across nodes.
    let mut slot = None;
    hmpi_core::request::scope(|scope| {
        let any = scope.start_take(world, &mut slot, 8, ANY_SOURCE, 0);
        assert!(matches!(any, Err(hmpi_core::Error::Rank { .. })));
    });
    world.barrier().unwrap();
    let mut out = None;
    let mut st = raw::Status::empty();
    let any = raw::recv_owned_into(
        world,
        Traffic::PointToPoint,
        &mut out,
        8,
        ANY_SOURCE,
        0,
        &mut st,
    );
    assert!(matches!(any, Err(hmpi_core::Error::Rank { .. })));
    world.barrier().unwrap();
}
