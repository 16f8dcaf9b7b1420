//! Intercommunicators across real ranks (2 to 6, more ranks than cores):
//! the world split into even and odd ranks (uneven halves for odd counts),
//! joined by `intercomm_create`; point-to-point naming the remote group,
//! wildcard receives, collectives through the raw tier with every root
//! variant, merge with both high flags, dup / split / compare, and
//! `create_group`; hints on communicators.

use hmpi_core::collective::inter::ROOT;
use hmpi_core::collective::raw::{self as craw, Mode};
use hmpi_core::datatype::Equivalence;
use hmpi_core::intercomm::{self, CommRelation};
use hmpi_core::launch::rank_tests;
use hmpi_core::op::{Operation, SystemOperation};
use hmpi_core::prelude::*;
use hmpi_core::{Info, InterCommunicator};

fn info_with(k: &str, v: &str) -> Info {
    let mut i = Info::new();
    i.set(k, v).unwrap();
    i
}

fn sum_op() -> Operation {
    Operation::System(SystemOperation::sum())
}

fn inter_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let side = me % 2;
    let half = world.split(Some(side as u32), me).unwrap().unwrap();
    let local: Vec<i32> = (0..n).filter(|r| r % 2 == side).collect();
    let remote: Vec<i32> = (0..n).filter(|r| r % 2 != side).collect();
    assert!(!half.is_inter());
    let ic = intercomm::intercomm_create(&half, 0, Some(&world), remote[0], 5).unwrap();
    let lrank = ic.rank();
    assert_eq!(ic.size() as usize, local.len());
    assert_eq!(ic.remote_size() as usize, remote.len());
    assert_eq!(ic.remote_group().world_ranks(), &remote[..]);
    assert_eq!(local[lrank as usize], me);
    let c = ic.as_simple().clone();
    assert!(c.is_inter());

    // Point-to-point: every local rank to every remote rank.
    for j in 0..ic.remote_size() {
        ic.process_at_rank(j)
            .send_with_tag(&(me * 100 + j), lrank)
            .unwrap();
    }
    let mut seen = vec![false; remote.len()];
    for _ in 0..remote.len() {
        let (x, st) = ic.any_process().receive::<i32>().unwrap();
        let s = st.source_rank() as usize;
        assert!(!seen[s]);
        seen[s] = true;
        assert_eq!(st.tag(), s as i32);
        assert_eq!(x, remote[s] * 100 + lrank);
    }
    assert!(ic.process_at_rank(ic.remote_size()).send(&1i32).is_err());
    ic.barrier().unwrap();

    // Collectives through the raw tier.
    let dt = i32::equivalent_datatype();
    let remote_sum: i32 = remote.iter().map(|w| w + 1).sum();
    let mine = [me + 1, 2 * (me + 1)];
    let mut out = [0i32; 2];
    // SAFETY: both buffers hold 2 i32 for the blocking call.
    unsafe {
        craw::reduce(
            &c,
            Some(mine.as_ptr().cast()),
            out.as_mut_ptr().cast(),
            2,
            &dt,
            &sum_op(),
            None,
            Mode::Block,
        )
        .unwrap();
    }
    assert_eq!(out, [remote_sum, 2 * remote_sum]);
    for root_side in 0..2 {
        let root_size = if root_side == side {
            local.len()
        } else {
            remote.len()
        };
        for rt in 0..root_size as i32 {
            let root = if root_side != side {
                rt
            } else if lrank == rt {
                ROOT
            } else {
                PROC_NULL
            };
            let mut b = if root == ROOT {
                [rt, 7, root_side]
            } else {
                [-1; 3]
            };
            // SAFETY: `b` holds 3 i32 for the blocking call.
            unsafe { craw::bcast(&c, b.as_mut_ptr().cast(), 3, &dt, root, Mode::Block).unwrap() };
            let want = if root == PROC_NULL {
                [-1; 3]
            } else {
                [rt, 7, root_side]
            };
            assert_eq!(b, want);
            let mut r = [-1i32; 2];
            // SAFETY: as above, 2 i32.
            unsafe {
                craw::reduce(
                    &c,
                    Some(mine.as_ptr().cast()),
                    r.as_mut_ptr().cast(),
                    2,
                    &dt,
                    &sum_op(),
                    Some(root),
                    Mode::Block,
                )
                .unwrap();
            }
            let want = if root == ROOT {
                [remote_sum, 2 * remote_sum]
            } else {
                [-1, -1]
            };
            assert_eq!(r, want);
        }
    }
    // rsmpi's names on the InterCommunicator: results from the remote group.
    let mut sum = 0i32;
    ic.all_reduce_into(&(me + 1), &mut sum, SystemOperation::sum())
        .unwrap();
    assert_eq!(sum, remote_sum);
    let mut all = vec![0i32; remote.len()];
    ic.all_gather_into(&me, &mut all[..]).unwrap();
    assert_eq!(all, remote);
    let to: Vec<i32> = (0..remote.len() as i32).map(|j| me * 10 + j).collect();
    let mut from = vec![0i32; remote.len()];
    ic.all_to_all_into(&to[..], &mut from[..]).unwrap();
    let want: Vec<i32> = remote.iter().map(|w| w * 10 + lrank).collect();
    assert_eq!(from, want);
    ic.barrier().unwrap();
    // A scan is not defined here.
    // SAFETY: nothing is read or written (refused before).
    let scan = unsafe {
        craw::scan(
            &c,
            Some(mine.as_ptr().cast()),
            out.as_mut_ptr().cast(),
            1,
            &dt,
            &sum_op(),
            false,
            Mode::Block,
        )
    };
    assert!(matches!(scan, Err(Error::Comm { .. })));

    // Merge: the group that passes `false` first.
    for hi in [false, true] {
        let high = if side == 0 { hi } else { !hi };
        let m = ic.merge(high).unwrap();
        assert!(!m.is_inter());
        assert_eq!(m.size(), n);
        let want = if high {
            remote.len() as i32 + lrank
        } else {
            lrank
        };
        assert_eq!(m.rank(), want);
        let mut all = vec![0i32; n as usize];
        m.all_gather_into(&me, &mut all[..]).unwrap();
        let (a, b) = if high {
            (&remote, &local)
        } else {
            (&local, &remote)
        };
        let order: Vec<i32> = a.iter().chain(b.iter()).copied().collect();
        assert_eq!(all, order);
    }

    // Dup, compare, split.
    let d = InterCommunicator::from_simple(ic.duplicate().unwrap()).unwrap();
    assert_eq!(
        intercomm::compare(&c, d.as_simple()),
        CommRelation::Congruent
    );
    assert_eq!(intercomm::compare(&c, &c), CommRelation::Identical);
    assert_eq!(intercomm::compare(&c, &half), CommRelation::Unequal);
    d.process_at_rank(0).send(&me).unwrap();
    if lrank == 0 {
        for _ in 0..remote.len() {
            let (x, st) = d.any_process().receive::<i32>().unwrap();
            assert_eq!(x, remote[st.source_rank() as usize]);
        }
    }
    let sp = ic.split(Some(u32::from(lrank == 0)), 0).unwrap();
    match sp {
        Some(s) if lrank == 0 => {
            assert!(s.is_inter());
            assert_eq!((s.size(), s.world_ranks().len()), (1, 1));
        }
        Some(s) => assert_eq!(s.world_ranks().len(), remote.len() - 1),
        None => assert!(lrank != 0 && remote.len() == 1),
    }
    let bad = intercomm::intercomm_create(&half, half.size(), Some(&world), remote[0], 5);
    assert!(matches!(bad, Err(Error::Rank { .. })));
    // A remote leader in the local group: the leader refuses, and its
    // group learns it instead of waiting.
    let bad = intercomm::intercomm_create(&half, 0, Some(&world), local[0], 6);
    match bad {
        Err(Error::Rank { .. }) => assert_eq!(lrank, 0),
        Err(Error::Comm { .. }) => assert_ne!(lrank, 0),
        other => panic!("{other:?}"),
    }

    // create_group: only the members of the group call it.
    let evens = world.group().incl(&local).unwrap();
    if side == 0 {
        let e = intercomm::create_group(&world, &evens, 3).unwrap();
        assert_eq!((e.size(), e.rank()), (local.len() as i32, lrank));
        e.barrier().unwrap();
    }

    // idup: started, then other traffic, then waited for; on the
    // intercommunicator and on the world, with a blocking dup between.
    let (tx, rx) = std::sync::mpsc::channel();
    let tx2 = tx.clone();
    let r1 = intercomm::idup(&c, None, move |r| {
        let _ = tx.send(r);
    })
    .unwrap();
    let r2 = intercomm::idup(&world, Some(info_with("hmpi_k", "v")), move |r| {
        let _ = tx2.send(r);
    })
    .unwrap();
    if me == 0 {
        world.process_at_rank(1).send(&5i32).unwrap();
    } else if me == 1 {
        let (x, _) = world.process_at_rank(0).receive::<i32>().unwrap();
        assert_eq!(x, 5);
    }
    let blocking = world.duplicate().unwrap();
    r1.wait().unwrap();
    r2.wait().unwrap();
    let a = rx.recv().unwrap().unwrap();
    let b = rx.recv().unwrap().unwrap();
    let (di, dw) = if a.is_inter() { (a, b) } else { (b, a) };
    assert_eq!(intercomm::compare(&di, &c), CommRelation::Congruent);
    assert_eq!(intercomm::compare(&dw, &blocking), CommRelation::Congruent);
    assert_eq!(dw.info().get("hmpi_k"), Some("v"));
    dw.barrier().unwrap();
    di.barrier().unwrap();

    // Hints.
    let mut info = Info::new();
    info.set("hmpi_test_key", "on").unwrap();
    half.set_info(&info).unwrap();
    let hd = half.duplicate().unwrap();
    assert_eq!(hd.info().get("hmpi_test_key"), Some("on"));
    world.barrier().unwrap();
}

fn main() {
    rank_tests::main(
        |role| {
            let u = hmpi_core::init().expect("init");
            match role {
                "inter" => inter_rank(u),
                _ => return None,
            }
            Some(())
        },
        &[("intercommunicators_on_two_to_six_ranks", || {
            for n in [2, 3, 4, 6] {
                let r = rank_tests::launch("inter", n, &[]);
                rank_tests::assert_ran(&r, "inter");
            }
        })],
    );
}
