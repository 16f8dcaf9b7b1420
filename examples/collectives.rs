//! Collectives on the shared heap, as the README shows them: an
//! allreduce, a broadcast and a nonblocking allgather in a scope.
//!
//! ```sh
//! cargo build --release --example collectives
//! target/release/hmpirun -n 4 target/release/examples/collectives
//! ```

use hmpi::prelude::*;

fn main() -> hmpi::Result<()> {
    let universe = hmpi::init()?;
    let world = universe.world();
    let mut sum = 0.0f64;
    world.all_reduce_into(&(world.rank() as f64), &mut sum, SystemOperation::sum())?;
    let mut v = vec![0u32; 4];
    if world.rank() == 0 {
        v = vec![1, 2, 3, 4];
    }
    world.process_at_rank(0).broadcast_into(&mut v[..])?;
    // Nonblocking, overlapped with other work, completed by the scope.
    let mut all = vec![0i32; world.size() as usize];
    let me = world.rank();
    request::scope(|scope| {
        let r = world.immediate_all_gather_into(scope, &me, &mut all[..])?;
        r.wait()
    })?;
    let n = world.size();
    assert_eq!(sum, f64::from(n * (n - 1) / 2));
    assert_eq!(v, [1, 2, 3, 4]);
    assert_eq!(all, (0..n).collect::<Vec<_>>());
    if me == 0 {
        println!("{n} ranks: sum of ranks {sum}, broadcast {v:?}, gathered {all:?}");
    }
    Ok(())
}
