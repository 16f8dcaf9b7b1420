//! The launcher against ranks that leave early: a rank that exits with
//! status 0 without finalizing ends the job (its peers would wait for it
//! forever, in a receive, a barrier, a synchronous send or a collective),
//! so does a rank that exits before initializing while its peers wait in
//! init, and a rank that exits after finalizing does not. Without a
//! launcher that watches, the library itself turns a wait on a dead peer
//! into an error. Also: the segment's inherited descriptor does not reach
//! programs a rank starts, and a rank can be started once per job.
//!
//! Real ranks of this binary (`harness = false`, see
//! [`hmpi_core::launch::rank_tests`]), run through the library and through
//! the `hmpirun` binary, each job with a private segment directory.

use hmpi_core::launch::{rank_tests, Launcher, RankStatus};
use hmpi_core::prelude::*;
use shmheap::segment::SegmentSpec;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const HMPIRUN: &str = env!("CARGO_BIN_EXE_hmpirun");

/// How long the job may take to end after a rank left without finalizing.
const LIMIT: f64 = 2.0;

/// A private directory for one test's segment files, removed at the end.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new(name: &str) -> ShmDir {
        let dir =
            PathBuf::from("/dev/shm").join(format!("hmpi-faults-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        ShmDir(dir)
    }

    fn assert_empty(&self) {
        let left: Vec<_> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "segment files left behind: {left:?}");
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Ranks of the early-exit jobs: one per kind of wait.
const EARLY_RANKS: u32 = 5;

/// Rank 1 leaves right after init; rank 0 waits in a receive from it,
/// rank 2 in a barrier, rank 3 in a synchronous send to it and rank 4 in
/// an allreduce, forever unless the launcher ends the job.
fn early_exit_rank() {
    let universe = hmpi_core::init().expect("init");
    let world = universe.world();
    match world.rank() {
        1 => {
            println!("left-at {}", hmpi_core::time());
            std::process::exit(0); // no finalize
        }
        0 => {
            let _ = world.process_at_rank(1).receive_vec::<u64>();
        }
        3 => {
            let _ = world.process_at_rank(1).synchronous_send(&[7u64; 4][..]);
        }
        4 => {
            let mut sum = 0u64;
            let _ = world.all_reduce_into(&1u64, &mut sum, SystemOperation::sum());
        }
        _ => {
            let _ = world.barrier();
        }
    }
    // The library may notice the dead peer before the launcher ends the
    // job: wait here for the launcher.
    std::thread::sleep(Duration::from_secs(30));
    unreachable!("rank {} outlived the job", world.rank());
}

/// Rank 1 leaves right after init; the others wait for it, and find out
/// from the library (no launcher watches this job): a receive from it and
/// a synchronous send to it are errors that name it. A receive from any
/// source fails once every other member of its communicator has failed
/// (at once in the communicator of ranks 1 and 2; in the world only after
/// rank 0 has left too), and until then takes what a live one sends.
fn dead_peer_rank() {
    let universe = hmpi_core::init().expect("init");
    let world = universe.world();
    let failed = |r: hmpi_core::Result<()>, what: &str| match r {
        Err(hmpi_core::Error::ProcFailed { rank, world }) => {
            println!("{what} failed on rank {rank} (world {world})")
        }
        other => println!("{what} ended with {other:?}"),
    };
    let other = permuted(&world);
    // Ranks 1 and 2 (rank 1 is its rank 0).
    let pair = world
        .split_by_color(if world.rank() == 0 { None } else { Some(0) })
        .expect("split");
    match world.rank() {
        1 => std::process::exit(0), // no finalize
        0 => {
            failed(
                world.process_at_rank(1).receive_vec::<u64>().map(drop),
                "receive",
            );
            // The dead rank is rank 0 of `other`.
            failed(
                other.process_at_rank(0).receive_vec::<u64>().map(drop),
                "receive in another communicator",
            );
            // A receive that is only ever tested (MPI_Test in a loop),
            // never waited for.
            let mut buf = [0u64; 1];
            let tested = hmpi_core::request::scope(|scope| {
                let mut req = world
                    .process_at_rank(1)
                    .immediate_receive_into(scope, &mut buf[..])?;
                while req.test()?.is_none() {}
                Ok(())
            });
            failed(tested, "tested receive");
            // Rank 2 is in a receive from any source meanwhile, which
            // this satisfies: a live member may still send.
            std::thread::sleep(Duration::from_millis(300));
            world.process_at_rank(2).send(&[5u64][..]).unwrap();
        }
        _ => {
            failed(
                world.process_at_rank(1).synchronous_send(&[7u64; 4][..]),
                "ssend",
            );
            let pair = pair.expect("a member");
            failed(
                pair.any_process().receive_vec::<u64>().map(drop),
                "any-source receive among ranks 1 and 2",
            );
            match world.any_process().receive_vec::<u64>() {
                Ok((v, st)) => println!("any-source receive got {v:?} from {}", st.source_rank()),
                Err(e) => println!("any-source receive ended with {e:?}"),
            }
            // Rank 0 leaves (without finalizing) after its send.
            failed(
                world.any_process().receive_vec::<u64>().map(drop),
                "any-source receive",
            );
        }
    }
    // Not finalized: the world's final barrier would wait for rank 1.
    std::process::exit(0);
}

/// The collectives a job with a dead member tries, one per job (a
/// communicator whose collective failed is good for nothing else).
const DEAD_MEMBER_KINDS: [&str; 5] = ["barrier", "bcast", "allreduce", "ibarrier", "itest"];

/// A communicator of the world's three ranks in the order 1, 0, 2 (so
/// that world rank 1 is its rank 0); collective over the world.
fn permuted(world: &SimpleCommunicator) -> SimpleCommunicator {
    world
        .split_by_color_with_key(Some(0), [1, 0, 2][world.rank() as usize])
        .expect("split")
        .expect("a member")
}

/// Rank 1 of three leaves right after init; ranks 0 and 2 then call the
/// collective the role names (`dead-member-KIND`) on a communicator whose
/// ranks are not the world's ([`permuted`]: the dead rank is its rank 0),
/// and report how it ended. No launcher watches the job.
fn dead_member_rank() {
    let role = std::env::var(rank_tests::ROLE_VAR).unwrap();
    let kind = role.strip_prefix("dead-member-").unwrap().to_owned();
    let universe = hmpi_core::init().expect("init");
    let world = universe.world();
    let me = world.rank();
    // Made while every rank is alive.
    let reversed = permuted(&world);
    reversed.barrier().expect("barrier with every member alive");
    if me == 1 {
        std::process::exit(0); // no finalize
    }
    let t0 = hmpi_core::time();
    let r = match kind.as_str() {
        "barrier" => reversed.barrier(),
        "bcast" => {
            // Root: the dead rank.
            let mut v = [0u64; 4];
            reversed.process_at_rank(0).broadcast_into(&mut v[..])
        }
        "allreduce" => {
            let mut sum = 0u64;
            reversed.all_reduce_into(&1u64, &mut sum, SystemOperation::sum())
        }
        "ibarrier" => hmpi_core::request::scope(|scope| {
            reversed.immediate_barrier(scope).and_then(|req| req.wait())
        }),
        // Tested, never waited for.
        "itest" => hmpi_core::request::scope(|scope| {
            let mut req = reversed.immediate_barrier(scope)?;
            loop {
                if let Some(r) = req.test() {
                    break r;
                }
                std::thread::yield_now();
            }
        }),
        other => panic!("no collective {other}"),
    };
    let took = hmpi_core::time() - t0;
    match r {
        Err(hmpi_core::Error::ProcFailed { rank, world }) => {
            println!("{kind} failed on rank {rank} (world {world}) after {took:.3} s")
        }
        other => println!("{kind} ended with {other:?}"),
    }
    // A later collective on the communicator fails at once, with the same rank.
    match reversed.barrier() {
        Err(hmpi_core::Error::ProcFailed { rank, .. }) => println!("then barrier failed on {rank}"),
        other => println!("then barrier ended with {other:?}"),
    }
    std::process::exit(0);
}

fn a_collective_with_a_dead_member_is_an_error_without_a_launcher() {
    for kind in DEAD_MEMBER_KINDS {
        let out = launch_unwatched(&format!("dead-member-{kind}"), 3, Duration::from_secs(20));
        for r in [0, 2] {
            // The dead process is rank 1 of the world, rank 0 of the
            // communicator.
            assert!(
                out[r].contains(&format!("{kind} failed on rank 0 (world 1) after ")),
                "{kind}: {out:?}"
            );
            assert!(
                out[r].contains("then barrier failed on 0"),
                "{kind}: {out:?}"
            );
        }
    }
}

/// Rank 1 of three starts init on a thread and ends (without finalizing)
/// while that thread waits in init for rank 2, which starts late; rank 0
/// waits in init meanwhile. No launcher watches the job: init itself
/// reports the dead rank on the others.
fn dead_in_init_rank() {
    let rank: u32 = std::env::var("HMPI_RANK").unwrap().parse().unwrap();
    match rank {
        1 => {
            std::thread::spawn(|| {
                let _ = hmpi_core::init();
                std::thread::sleep(Duration::from_secs(30));
            });
            std::thread::sleep(Duration::from_millis(300));
            std::process::exit(0);
        }
        2 => std::thread::sleep(Duration::from_secs(1)),
        _ => {}
    }
    match hmpi_core::init() {
        Err(hmpi_core::Error::ProcFailed { rank, world }) => {
            println!("init failed on rank {rank} (world {world})")
        }
        other => println!("init ended with {:?}", other.map(drop)),
    }
    std::process::exit(0);
}

fn a_rank_that_ends_in_init_fails_init_without_a_launcher() {
    let out = launch_unwatched("dead-in-init", 3, Duration::from_secs(20));
    assert!(
        out[0].contains("init failed on rank 1 (world 1)"),
        "{out:?}"
    );
    // Rank 2 passes the first barrier (rank 0 had arrived) and fails in
    // the second, on rank 1 (or rank 0, which may have left by then).
    assert!(out[2].contains("init failed on rank "), "{out:?}");
}

/// Writes this rank's pid to `$FAULTS_PID_DIR/rank-R` (before init, so
/// that a kill can find it at any moment), then passes messages around a
/// ring, with barriers and allreduces, until the job is killed.
fn busy_rank() {
    let dir = std::env::var("FAULTS_PID_DIR").unwrap();
    let rank = std::env::var("HMPI_RANK").unwrap();
    let tmp = format!("{dir}/.rank-{rank}");
    std::fs::write(&tmp, std::process::id().to_string()).unwrap();
    std::fs::rename(&tmp, format!("{dir}/rank-{rank}")).unwrap();
    let universe = hmpi_core::init().expect("init");
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    let mut data = vec![me as u64; 1 << 14];
    let start = std::time::Instant::now();
    let mut i = 0usize;
    while start.elapsed() < Duration::from_secs(20) {
        let len = [1, 64, 4096, 1 << 14][i % 4];
        let next = world.process_at_rank((me + 1) % n);
        let prev = world.process_at_rank((me + n - 1) % n);
        if me == 0 {
            next.send(&data[..len]).unwrap();
            prev.receive_into(&mut data[..len]).unwrap();
        } else {
            prev.receive_into(&mut data[..len]).unwrap();
            next.send(&data[..len]).unwrap();
        }
        if i % 3 == 0 {
            world.barrier().unwrap();
        }
        if i % 5 == 0 {
            let mut sum = 0u64;
            world
                .all_reduce_into(&1u64, &mut sum, SystemOperation::sum())
                .unwrap();
        }
        i += 1;
    }
    unreachable!("rank {me} was not killed");
}

/// Rank 1 exits before it initializes; the others wait for it in init.
fn exit_before_init_rank() {
    if std::env::var("HMPI_RANK").as_deref() == Ok("1") {
        println!("left-at {}", hmpi_core::time());
        std::process::exit(0);
    }
    let _universe = hmpi_core::init();
    std::thread::sleep(Duration::from_secs(30));
    unreachable!("init returned without rank 1");
}

/// After init, a second process that attaches as this rank (through this
/// process's descriptor of the segment, with the same variables) is
/// refused by init.
fn claim_twice_rank() {
    let universe = hmpi_core::init().expect("init");
    let path = std::env::var("HMPI_SHM_NAME").unwrap();
    let n = path
        .strip_prefix("/proc/self/fd/")
        .expect("a descriptor path");
    let out = Command::new(std::env::current_exe().unwrap())
        .env(rank_tests::ROLE_VAR, "claim-again")
        .env(
            "HMPI_SHM_NAME",
            format!("/proc/{}/fd/{n}", std::process::id()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("refused: ") && stdout.contains("already taken"),
        "{stdout}"
    );
    drop(universe);
}

/// The second process of [`claim_twice_rank`]: init must fail.
fn claim_again_rank() {
    match hmpi_core::init() {
        Ok(_) => panic!("a second process initialized as an existing rank"),
        Err(e) => println!("refused: {e}"),
    }
}

/// Every rank finalizes; then rank 1 exits at once while the others linger.
fn finalize_then_linger_rank() {
    let universe = hmpi_core::init().expect("init");
    let me = universe.world().rank();
    universe.finalize().expect("finalize");
    if me != 1 {
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// After init, the inherited descriptor of the segment is close-on-exec:
/// a program this rank starts cannot attach as the same rank through it.
fn descriptor_kept_rank() {
    let universe = hmpi_core::init().expect("init");
    let path = std::env::var("HMPI_SHM_NAME").unwrap();
    let n: i32 = path
        .strip_prefix("/proc/self/fd/")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("HMPI_SHM_NAME={path}"));
    // SAFETY: F_GETFD only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(n, libc::F_GETFD) };
    assert!(flags >= 0 && flags & libc::FD_CLOEXEC != 0, "flags {flags}");
    let status = Command::new("/bin/sh")
        .args(["-c", r#"exec 2>/dev/null; ! test -e "$HMPI_SHM_NAME""#])
        .status()
        .unwrap();
    assert!(status.success(), "a child could open {path}");
    drop(universe);
}

/// The `left-at` time rank 1 printed.
fn left_at(stdout: &[u8]) -> f64 {
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|l| l.strip_prefix("left-at ")?.parse().ok())
        .expect("rank 1 printed when it left")
}

fn early_exit_ends_the_job_through_the_library() {
    let dir = ShmDir::new("lib");
    let exe = std::env::current_exe().unwrap();
    let report = Launcher::new(exe, EARLY_RANKS)
        .env(rank_tests::ROLE_VAR, "early-exit")
        .spec(SegmentSpec {
            arena_len: 64 << 20,
            dir: dir.0.clone(),
            ..SegmentSpec::default()
        })
        .capture_output(true)
        .timeout(Duration::from_secs(60))
        .run()
        .unwrap();
    let ended = hmpi_core::time();
    let d = rank_tests::describe(&report);
    assert!(!report.timed_out, "{d}");
    assert_eq!(report.first_failure, Some(1), "{d}");
    assert_eq!(report.ranks[1].status, RankStatus::NotFinalized, "{d}");
    for r in [0, 2, 3, 4] {
        assert_eq!(report.ranks[r].status, RankStatus::Killed, "{d}");
    }
    assert_ne!(report.exit_code(), 0);
    let waited = ended - left_at(&report.ranks[1].stdout);
    assert!(
        waited <= LIMIT,
        "the job ended {waited:.2} s after rank 1 left"
    );
    dir.assert_empty();
}

fn early_exit_ends_the_job_under_hmpirun_with_a_message() {
    let dir = ShmDir::new("bin");
    let out = Command::new(HMPIRUN)
        .args(["-n", &EARLY_RANKS.to_string(), "--timeout", "60", "--"])
        .arg(std::env::current_exe().unwrap())
        .env(rank_tests::ROLE_VAR, "early-exit")
        .env("HMPI_SHM_DIR", &dir.0)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ended = hmpi_core::time();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hmpirun: rank 1 exited with status 0 without finalizing"),
        "stderr:\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let waited = ended - left_at(&out.stdout);
    assert!(
        waited <= LIMIT,
        "hmpirun ended {waited:.2} s after rank 1 left"
    );
    println!("hmpirun ended {waited:.3} s after rank 1 left without finalizing");
    dir.assert_empty();
}

fn a_rank_that_exits_before_init_ends_the_job() {
    let dir = ShmDir::new("preinit");
    let out = Command::new(HMPIRUN)
        .args(["-n", "3", "--timeout", "60", "--"])
        .arg(std::env::current_exe().unwrap())
        .env(rank_tests::ROLE_VAR, "exit-before-init")
        .env("HMPI_SHM_DIR", &dir.0)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ended = hmpi_core::time();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hmpirun: rank 1 exited with status 0 before initializing"),
        "stderr:\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let waited = ended - left_at(&out.stdout);
    assert!(
        waited <= LIMIT,
        "hmpirun ended {waited:.2} s after rank 1 left"
    );
    dir.assert_empty();
}

/// Starts `ranks` ranks of this binary in `role` the way another launcher
/// would: the segment and the variables, but nobody watching the ranks.
/// Returns each rank's standard output, after all have exited.
fn launch_unwatched(role: &str, ranks: u32, limit: Duration) -> Vec<String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let dir = ShmDir::new(role);
    let spec = SegmentSpec {
        ranks,
        arena_len: 64 << 20,
        dir: dir.0.clone(),
        ..SegmentSpec::default()
    };
    let file = shmheap::segment::SegmentFile::create(&spec, role).unwrap();
    let fd = file.fd().as_raw_fd();
    let children: Vec<_> = (0..ranks)
        .map(|r| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.env(rank_tests::ROLE_VAR, role)
                .env("HMPI_RANK", r.to_string())
                .env("HMPI_SIZE", ranks.to_string())
                .env("HMPI_LOCAL_RANK", r.to_string())
                .env("HMPI_LOCAL_SIZE", ranks.to_string())
                .env("HMPI_SHM_NAME", file.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped());
            // SAFETY: between fork and exec only fcntl, which is
            // async-signal-safe; it lets the rank inherit the segment.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd.spawn().unwrap()
        })
        .collect();
    drop(file);
    let start = std::time::Instant::now();
    let outputs: Vec<String> = children
        .into_iter()
        .map(|mut c| {
            loop {
                if c.try_wait().unwrap().is_some() {
                    break;
                }
                if start.elapsed() > limit {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut s = String::new();
            use std::io::Read;
            c.stdout.take().unwrap().read_to_string(&mut s).unwrap();
            s
        })
        .collect();
    assert!(
        start.elapsed() < limit,
        "the ranks did not end within {limit:?}: {outputs:?}"
    );
    dir.assert_empty();
    outputs
}

fn a_wait_on_a_dead_peer_is_an_error_without_a_launcher() {
    let out = launch_unwatched("dead-peer", 3, Duration::from_secs(20));
    for (rank, line) in [
        (0, "receive failed on rank 1 (world 1)"),
        (
            0,
            "receive in another communicator failed on rank 0 (world 1)",
        ),
        (0, "tested receive failed on rank 1 (world 1)"),
        (2, "ssend failed on rank 1 (world 1)"),
        (
            2,
            "any-source receive among ranks 1 and 2 failed on rank 0 (world 1)",
        ),
        (2, "any-source receive got [5] from 0"),
        (2, "any-source receive failed on rank "),
    ] {
        assert!(out[rank].contains(line), "rank {rank}: {line:?} in {out:?}");
    }
}

/// `kill -9` of a random rank at a random moment (its start, init, a
/// message, a barrier, an allreduce), 30 seeded trials: the job ends
/// within the limit, hmpirun names the rank, no segment file and no rank
/// process is left.
fn killing_a_random_rank_at_a_random_moment_ends_the_job() {
    let mut x: u64 = 0x2026_1127;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for trial in 0..30 {
        let dir = ShmDir::new(&format!("kill{trial}"));
        let pids = dir.0.join("pids");
        std::fs::create_dir(&pids).unwrap();
        let ranks = 3;
        let victim = (next() % ranks) as u32;
        let delay = Duration::from_millis(next() % 300);
        let child = Command::new(HMPIRUN)
            .args(["-n", &ranks.to_string(), "--timeout", "60", "--"])
            .arg(std::env::current_exe().unwrap())
            .env(rank_tests::ROLE_VAR, "busy")
            .env("FAULTS_PID_DIR", &pids)
            .env("HMPI_SHM_DIR", &dir.0)
            .env("HMPI_HEAP_PER_RANK", "64M")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid_of = |r: u32| -> Option<i32> {
            std::fs::read_to_string(pids.join(format!("rank-{r}")))
                .ok()?
                .parse()
                .ok()
        };
        let started = std::time::Instant::now();
        std::thread::sleep(delay);
        let pid = loop {
            if let Some(p) = pid_of(victim) {
                break p;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "trial {trial}: no pid"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        // SAFETY: kill only sends a signal to a rank of this job.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
        let killed = std::time::Instant::now();
        let out = child.wait_with_output().unwrap();
        let waited = killed.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "hmpirun: rank {victim} was killed by signal 9 (SIGKILL)"
            )),
            "trial {trial} (rank {victim} after {delay:?}): stderr:\n{stderr}"
        );
        assert_eq!(out.status.code(), Some(128 + 9), "trial {trial}: {stderr}");
        assert!(
            waited <= LIMIT,
            "trial {trial}: the job ended {waited:.2} s after the kill"
        );
        for r in 0..ranks as u32 {
            if let Some(p) = pid_of(r) {
                assert!(
                    !std::path::Path::new(&format!("/proc/{p}")).exists(),
                    "trial {trial}: rank {r} (pid {p}) is still there"
                );
            }
        }
        std::fs::remove_dir_all(&pids).unwrap();
        dir.assert_empty();
    }
}

fn a_rank_is_claimed_once_per_job() {
    let report = rank_tests::launch("claim-twice", 2, &[]);
    rank_tests::assert_ran(&report, "claim-twice");
}

fn a_ranks_children_do_not_inherit_the_segment() {
    let report = rank_tests::launch("descriptor-kept", 2, &[]);
    rank_tests::assert_ran(&report, "descriptor-kept");
}

fn exiting_after_finalize_is_normal() {
    let report = rank_tests::launch("finalize-then-linger", 3, &[]);
    rank_tests::assert_ran(&report, "finalize-then-linger");
}

fn main() {
    rank_tests::main(
        |role| {
            let body: fn() = match role {
                "early-exit" => early_exit_rank,
                "finalize-then-linger" => finalize_then_linger_rank,
                "descriptor-kept" => descriptor_kept_rank,
                "dead-peer" => dead_peer_rank,
                "dead-in-init" => dead_in_init_rank,
                r if r.starts_with("dead-member-") => dead_member_rank,
                "exit-before-init" => exit_before_init_rank,
                "claim-twice" => claim_twice_rank,
                "claim-again" => claim_again_rank,
                "busy" => busy_rank,
                _ => return None,
            };
            body();
            Some(())
        },
        &[
            (
                "early_exit_ends_the_job_through_the_library",
                early_exit_ends_the_job_through_the_library,
            ),
            (
                "early_exit_ends_the_job_under_hmpirun_with_a_message",
                early_exit_ends_the_job_under_hmpirun_with_a_message,
            ),
            (
                "exiting_after_finalize_is_normal",
                exiting_after_finalize_is_normal,
            ),
            (
                "a_rank_that_exits_before_init_ends_the_job",
                a_rank_that_exits_before_init_ends_the_job,
            ),
            (
                "a_wait_on_a_dead_peer_is_an_error_without_a_launcher",
                a_wait_on_a_dead_peer_is_an_error_without_a_launcher,
            ),
            (
                "a_collective_with_a_dead_member_is_an_error_without_a_launcher",
                a_collective_with_a_dead_member_is_an_error_without_a_launcher,
            ),
            (
                "a_rank_that_ends_in_init_fails_init_without_a_launcher",
                a_rank_that_ends_in_init_fails_init_without_a_launcher,
            ),
            (
                "a_rank_is_claimed_once_per_job",
                a_rank_is_claimed_once_per_job,
            ),
            (
                "killing_a_random_rank_at_a_random_moment_ends_the_job",
                killing_a_random_rank_at_a_random_moment_ends_the_job,
            ),
            (
                "a_ranks_children_do_not_inherit_the_segment",
                a_ranks_children_do_not_inherit_the_segment,
            ),
        ],
    );
}
