//! Ownership passing in a program whose global allocator is the system's,
//! not the node heap: give/take still work, by copying (the engine moves a
//! given block into the node heap, the taker gets a fresh copy from its
//! own allocator); values that own further heap blocks cannot be given and
//! come back with an error. (A test binary has one global allocator, hence
//! this separate binary.)

use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use opi::prelude::*;

const TESTS: &[(&str, fn())] = &[(
    "give_and_take_copy_without_the_node_heap_allocator",
    give_and_take_copy_without_the_node_heap_allocator,
)];

fn main() {
    rank_tests::main(
        |role| {
            if role != "copy" {
                return None;
            }
            let universe = hmpi_core::init().expect("init");
            copy_rank(universe);
            Some(())
        },
        TESTS,
    );
}

fn give_and_take_copy_without_the_node_heap_allocator() {
    rank_tests::assert_ran(&rank_tests::launch("copy", 2, &[]), "copy");
}

fn copy_rank(u: Universe) {
    let w = u.world();
    let me = w.rank();
    let peer = w.process_at_rank(1 - me);
    assert!(!opi::transfer::global_is_node_heap());
    let sizes = [0usize, 1, 100, 4096, 100_000, 3 << 20];
    for &n in &sizes {
        if me == 0 {
            let v: Vec<u16> = (0..n).map(|i| i as u16 ^ 0xa5).collect();
            assert!(!shmheap::is_shared(v.as_ptr()));
            peer.give(v).unwrap();
            peer.give(Box::new([n as u64; 8])).unwrap();
            peer.give(format!("{n} ✓")).unwrap();
            let mut b = OpiBuf::<u32>::with_capacity(n).unwrap();
            b.extend((0..n as u32).map(|i| i * 3));
            peer.give(b).unwrap();
        } else {
            let v = peer.take_vec::<u16>().unwrap();
            assert_eq!(v.len(), n);
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u16 ^ 0xa5));
            assert!(!shmheap::is_shared(v.as_ptr()), "a private copy");
            assert_eq!(*peer.take::<[u64; 8]>().unwrap(), [n as u64; 8]);
            assert_eq!(peer.take_string().unwrap(), format!("{n} ✓"));
            let b = peer.take_buf::<u32>().unwrap();
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u32 * 3));
            assert_eq!(b.len(), n);
        }
    }
    if me == 0 {
        // Deep values: refused, returned intact.
        let deep = Box::new(vec![1u8, 2, 3]);
        let e = peer.give(deep).unwrap_err();
        assert!(matches!(e.error, Error::Type { .. }), "{e}");
        assert!(e.to_string().contains("ShmHeap"), "{e}");
        assert_eq!(*e.into_inner(), [1, 2, 3]);
        let e = peer.give(vec![String::from("x")]).unwrap_err();
        assert_eq!(e.into_inner(), ["x"]);
        // Interop still works: a plain send taken, a give received.
        peer.send(&[5u32; 4][..]).unwrap();
        peer.give(vec![6u8; 1000]).unwrap();
        // Mismatch: an error, the block freed.
        peer.give(vec![1u64; 10]).unwrap();
    } else {
        assert_eq!(peer.take_vec::<u32>().unwrap(), [5; 4]);
        let (v, st) = peer.receive_vec::<u8>().unwrap();
        assert_eq!((v, st.byte_count()), (vec![6u8; 1000], 1000));
        assert!(matches!(peer.take_vec::<i64>(), Err(Error::Type { .. })));
        let s = hmpi_core::environment::endpoint().unwrap().stats();
        assert_eq!(s.owned_in_place, 0, "{s:?}");
        assert!(s.owned_copied >= 4 * sizes.len() as u64, "{s:?}");
    }
    drop(u);
}
