//! Binding and mapping end to end on this machine: `hmpirun --bind-to`
//! and `--map-by` at every level (ranks read their own affinity and check
//! it against the placement), `--report-bindings`, the oversubscription
//! note, bad values; and the launcher giving each rank its domain
//! (`HMPI_NODE_DOMAIN`) on a topology of two sockets made of this
//! machine's CPUs, which the collectives' hierarchy then uses.

use hmpi_core::launch::topo::{Level, Pu, Topology, DOMAIN_VAR};
use hmpi_core::launch::{allowed_cpus, rank_tests, Bind, JobReport, Launcher};
use hmpi_core::prelude::*;
use shmheap::ShmHeap;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const HMPIRUN: &str = env!("CARGO_BIN_EXE_hmpirun");
/// Each rank's expected CPUs: `0,1;2;…` (one list per rank, `;` between).
const CPUS_VAR: &str = "HMPI_TEST_CPUS";
/// Each rank's expected domain, `-` for none: `0;1;0`.
const DOMAINS_VAR: &str = "HMPI_TEST_DOMAINS";

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// This rank's entry of the `;`-separated variable `var`.
fn my_entry(var: &str) -> String {
    let rank: usize = std::env::var("HMPI_RANK").unwrap().parse().unwrap();
    let all = std::env::var(var).unwrap();
    all.split(';').nth(rank).unwrap().to_string()
}

/// A rank checks that it runs on exactly the CPUs it was meant to.
fn affinity_rank() {
    let want = my_entry(CPUS_VAR);
    assert_eq!(list(&allowed_cpus()), want, "the rank's affinity");
}

/// A rank checks its affinity and domain, then runs broadcasts and
/// allreduces, which go hierarchical over the launcher's domains.
fn domain_rank() {
    affinity_rank();
    let want = my_entry(DOMAINS_VAR);
    let got = std::env::var(DOMAIN_VAR).unwrap_or_else(|_| "-".into());
    assert_eq!(got, want, "{DOMAIN_VAR}");
    let u = hmpi_core::init().expect("init");
    let world = u.world();
    let (me, n) = (world.rank() as u64, world.size() as u64);
    for count in [1usize, 1000, 1 << 16] {
        let mine: Vec<u64> = (0..count as u64).map(|i| me * 1000 + i).collect();
        let mut sum = vec![0u64; count];
        world
            .all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
            .unwrap();
        for (i, s) in sum.iter().enumerate() {
            let i = i as u64;
            assert_eq!(*s, (0..n).map(|r| r * 1000 + i).sum::<u64>(), "sum {i}");
        }
        for root in 0..n {
            let mut b: Vec<u64> = if me == root {
                (0..count as u64).map(|i| root * 7 + i).collect()
            } else {
                vec![0; count]
            };
            world
                .process_at_rank(root as i32)
                .broadcast_into(&mut b[..])
                .unwrap();
            assert!(b.iter().enumerate().all(|(i, &x)| x == root * 7 + i as u64));
        }
    }
    let domains: std::collections::BTreeSet<String> = std::env::var(DOMAINS_VAR)
        .unwrap()
        .split(';')
        .map(str::to_string)
        .collect();
    let in_use = hmpi_core::collective::domains_in_use(&world);
    if !domains.contains("-") {
        // The launcher's domains win over hwloc's reading.
        assert_eq!(in_use, Some(domains.len()), "the launcher's domains");
    } else if !cfg!(feature = "hwloc") {
        // Nothing given and no hwloc: flat, as before.
        assert_eq!(in_use, None, "no domains given");
    }
}

fn hmpirun(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(HMPIRUN);
    cmd.args(args)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .env_remove("HMPI_TIMEOUT")
        .env_remove(DOMAIN_VAR)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `hmpirun -n 2 OPTIONS` runs ranks on the CPUs the launcher's placement
/// gives them, and reports them; a level this machine cannot tell is an
/// error with exit code 2.
fn every_level_binds() {
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let allowed = allowed_cpus();
    let mut cases: Vec<(Vec<&str>, Launcher)> = Vec::new();
    for name in ["hwthread", "core", "l3cache", "numa", "socket", "none"] {
        let bind = Bind::parse(name).unwrap();
        cases.push((vec!["--bind-to", name], Launcher::new(exe, 2).bind(bind)));
    }
    for (map, level, pe, bind) in [
        ("hwthread", Level::HwThread, 1, Bind::HwThread),
        ("socket", Level::Socket, 1, Bind::Socket),
        ("numa", Level::Numa, 1, Bind::Numa),
        ("core:PE=2", Level::Core, 2, Bind::Core),
    ] {
        let l = Launcher::new(exe, 2).map_by(level).pe(pe).bind(bind);
        cases.push((vec!["--map-by", map], l));
    }
    let l = Launcher::new(exe, 2).map_by(Level::Socket).bind(Bind::Core);
    cases.push((vec!["--map-by", "socket", "--bind-to", "core"], l));
    for (opts, launcher) in cases {
        let mut args = vec!["-n", "2", "--report-bindings", "--oversubscribe"];
        args.extend(&opts);
        args.push(exe);
        match launcher.placement() {
            Ok(placement) => {
                let want: Vec<String> = placement
                    .cpus
                    .iter()
                    .map(|s| list(s.as_deref().unwrap_or(&allowed)))
                    .collect();
                let env = [
                    (rank_tests::ROLE_VAR, "affinity".to_string()),
                    (CPUS_VAR, want.join(";")),
                ];
                let out = hmpirun(&args, &env);
                let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
                assert!(out.status.success(), "{opts:?}: {stdout}{stderr}");
                assert_eq!(stdout.matches("role affinity done").count(), 2, "{opts:?}");
                let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("MCW rank")).collect();
                assert_eq!(lines.len(), 2, "{opts:?}: {stderr}");
                for (rank, (line, set)) in lines.iter().zip(&placement.cpus).enumerate() {
                    assert!(line.starts_with('['), "{line}");
                    assert!(line.contains(&format!("MCW rank {rank} ")), "{line}");
                    match set {
                        Some(set) => {
                            let map = line.split(": ").nth(1).unwrap();
                            assert_eq!(map.matches('B').count(), set.len(), "{line}");
                            assert!(line.contains("socket "), "{line}");
                        }
                        None => assert!(line.contains("is not bound"), "{line}"),
                    }
                }
                if opts == ["--bind-to", "hwthread"] {
                    assert!(placement
                        .cpus
                        .iter()
                        .all(|s| s.as_ref().unwrap().len() == 1));
                }
            }
            Err(e) => {
                // This machine cannot tell the level (or has too few
                // cores for PE=2): hmpirun says why and exits 2.
                let out = hmpirun(&args, &[]);
                assert_eq!(out.status.code(), Some(2), "{opts:?}");
                assert!(text(&out.stderr).contains(&e.to_string()), "{opts:?}");
            }
        }
    }
}

/// Without options, as many ranks as CPUs get a CPU each (rank `i` the
/// `i`-th when Linux numbers the cores' first threads first).
fn the_default_is_a_cpu_each() {
    let exe = std::env::current_exe().unwrap();
    let allowed = allowed_cpus();
    let n = allowed.len() as u32;
    let p = Launcher::new(&exe, n)
        .bind(Bind::HwThread)
        .placement()
        .unwrap();
    let sets: Vec<Vec<usize>> = p.cpus.into_iter().map(Option::unwrap).collect();
    let mut all: Vec<usize> = sets.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, allowed, "one CPU each, every CPU once");
    let want: Vec<String> = sets.iter().map(|s| list(s)).collect();
    let env = [
        (rank_tests::ROLE_VAR, "affinity".to_string()),
        (CPUS_VAR, want.join(";")),
    ];
    let n = n.to_string();
    let out = hmpirun(&["-n", &n, exe.to_str().unwrap()], &env);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.matches("role affinity done").count(), allowed.len());
    assert!(stderr.is_empty(), "{stderr}");
}

/// More bound ranks than cores: said once, unless `--oversubscribe`; the
/// default placement never says it.
fn oversubscription_is_said_once() {
    let cpus = allowed_cpus().len();
    let n = (cpus * 2 + 1).to_string();
    let note = "oversubscribed";
    let out = hmpirun(&["-n", &n, "--bind-to", "hwthread", "true"], &[]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr).matches(note).count(),
        1,
        "{}",
        text(&out.stderr)
    );
    let out = hmpirun(
        &["-n", &n, "--bind-to", "core", "--oversubscribe", "true"],
        &[],
    );
    assert!(out.status.success());
    assert!(!text(&out.stderr).contains(note));
    let out = hmpirun(&["-n", &n, "true"], &[]);
    assert!(out.status.success());
    assert!(!text(&out.stderr).contains(note));
}

fn bad_values_exit_2() {
    for (args, needle) in [
        (&["--bind-to", "board"][..], "--bind-to"),
        (&["--bind-to=cores"], "--bind-to"),
        (&["--map-by", "node"], "--map-by"),
        (&["--map-by", "core:PE=x"], "invalid PE"),
        (&["--map-by", "core:span"], "only PE=n"),
        (&["--map-by", "core:PE=100000"], "PE=100000"),
        (
            &["--bind-to", "none", "--map-by", "core:PE=2"],
            "needs the ranks bound",
        ),
    ] {
        let mut all = vec!["-n", "2"];
        all.extend(args);
        all.push("true");
        let out = hmpirun(&all, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// This machine's allowed CPUs as `sockets` sockets (each its own L3 and
/// NUMA node), CPU i in socket `i * sockets / count`.
fn sockets_of_this_machine(sockets: usize) -> Topology {
    let cpus = allowed_cpus();
    let pus = cpus
        .iter()
        .enumerate()
        .map(|(i, &cpu)| {
            let s = (i * sockets / cpus.len()) as u32;
            Pu {
                cpu,
                core: i as u32,
                l3: Some(s),
                numa: Some(s),
                socket: Some(s),
            }
        })
        .collect();
    Topology::new(pus).unwrap()
}

/// Runs `role` on `ranks` ranks placed on `topo` by `map` and `bind`,
/// telling the ranks the placement to expect.
fn launch_on(topo: Topology, ranks: u32, map: Level, bind: Bind) -> JobReport {
    let exe = std::env::current_exe().unwrap();
    let launcher = Launcher::new(exe, ranks)
        .topology(topo)
        .map_by(map)
        .bind(bind)
        .oversubscribe(true)
        .capture_output(true)
        .timeout(Duration::from_secs(300))
        .env(rank_tests::ROLE_VAR, "domain")
        // Never passed on: the launcher sets it or removes it.
        .env(DOMAIN_VAR, "7");
    let p = launcher.placement().unwrap();
    let cpus: Vec<String> = p.cpus.iter().map(|s| list(s.as_ref().unwrap())).collect();
    let domains: Vec<String> = (0..ranks as usize)
        .map(|r| p.domains.as_ref().map_or("-".into(), |d| d[r].to_string()))
        .collect();
    launcher
        .env(CPUS_VAR, cpus.join(";"))
        .env(DOMAINS_VAR, domains.join(";"))
        .run()
        .unwrap()
}

fn the_hierarchy_takes_the_launchers_domains() {
    if allowed_cpus().len() < 2 {
        println!("(one CPU: no two sockets to make; only the one-domain case)");
    } else {
        for ranks in [3, 4, 5] {
            let r = launch_on(
                sockets_of_this_machine(2),
                ranks,
                Level::Socket,
                Bind::Socket,
            );
            rank_tests::assert_ran(&r, "domain");
            let r = launch_on(
                sockets_of_this_machine(2),
                ranks,
                Level::Core,
                Bind::L3Cache,
            );
            rank_tests::assert_ran(&r, "domain");
        }
    }
    // One domain: nothing passed, the collectives stay flat.
    let r = launch_on(sockets_of_this_machine(1), 3, Level::Core, Bind::Socket);
    rank_tests::assert_ran(&r, "domain");
}

fn main() {
    rank_tests::main(
        |role| {
            match role {
                "affinity" => affinity_rank(),
                "domain" => domain_rank(),
                _ => return None,
            }
            Some(())
        },
        &[
            ("every_level_binds", every_level_binds),
            ("the_default_is_a_cpu_each", the_default_is_a_cpu_each),
            (
                "oversubscription_is_said_once",
                oversubscription_is_said_once,
            ),
            ("bad_values_exit_2", bad_values_exit_2),
            (
                "the_hierarchy_takes_the_launchers_domains",
                the_hierarchy_takes_the_launchers_domains,
            ),
        ],
    );
}
