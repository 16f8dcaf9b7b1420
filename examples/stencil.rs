//! A 2D Jacobi stencil with halo exchange over a 2D grid of ranks; rank 0
//! gathers the result and compares it with a serial computation (the same
//! floating-point operations in the same order, so they must be equal).
//!
//! Run: `cargo build --release --examples && target/release/hmpirun -n 4 target/release/examples/stencil`

use hmpi::prelude::*;

/// Global grid, including the fixed boundary.
const NX: usize = 66;
const NY: usize = 50;
const ITERS: usize = 200;

const TAG_DOWN: i32 = 0; // a row going to the rank below
const TAG_UP: i32 = 1; // a row going to the rank above
const TAG_RIGHT: i32 = 2;
const TAG_LEFT: i32 = 3;
const TAG_BOUNDS: i32 = 10;
const TAG_BLOCK: i32 = 11;

fn main() {
    if let Err(e) = run() {
        eprintln!("stencil: {e}");
        std::process::exit(1);
    }
}

/// The initial value of global cell (i, j): fixed values on the boundary,
/// zero inside.
fn initial(i: usize, j: usize) -> f64 {
    if i == 0 || j == 0 || i == NX - 1 || j == NY - 1 {
        (i as f64 * 0.37).sin() + (j as f64 * 0.11).cos() + 1.0
    } else {
        0.0
    }
}

fn serial() -> Vec<f64> {
    let mut g: Vec<f64> = (0..NX * NY).map(|k| initial(k / NY, k % NY)).collect();
    let mut new = g.clone();
    for _ in 0..ITERS {
        for i in 1..NX - 1 {
            for j in 1..NY - 1 {
                new[i * NY + j] = 0.25
                    * (g[(i - 1) * NY + j]
                        + g[(i + 1) * NY + j]
                        + g[i * NY + j - 1]
                        + g[i * NY + j + 1]);
            }
        }
        std::mem::swap(&mut g, &mut new);
    }
    g
}

/// The interior range `[start, end)` of part `p` of `parts` along an axis
/// of `n` cells (boundary excluded).
fn part(n: usize, parts: usize, p: usize) -> (usize, usize) {
    let inner = n - 2;
    (1 + p * inner / parts, 1 + (p + 1) * inner / parts)
}

fn run() -> hmpi::Result<()> {
    let universe = hmpi::init()?;
    let world = universe.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    // Process grid px × py, as square as n allows.
    let px = (1..=n)
        .filter(|d| n % d == 0 && d * d <= n)
        .max()
        .unwrap_or(1);
    let py = n / px;
    let (pi, pj) = (me / py, me % py);
    let (r0, r1) = part(NX, px, pi);
    let (c0, c1) = part(NY, py, pj);
    let (lr, lc) = (r1 - r0 + 2, c1 - c0 + 2); // with a halo of one cell
    let at = |a: usize, b: usize| a * lc + b;
    let mut g: Vec<f64> = (0..lr * lc)
        .map(|k| initial(r0 - 1 + k / lc, c0 - 1 + k % lc))
        .collect();
    let mut new = g.clone();
    let rank = |i: usize, j: usize| (i * py + j) as i32;
    let up = (pi > 0).then(|| rank(pi - 1, pj));
    let down = (pi + 1 < px).then(|| rank(pi + 1, pj));
    let left = (pj > 0).then(|| rank(pi, pj - 1));
    let right = (pj + 1 < py).then(|| rank(pi, pj + 1));

    let t0 = universe.wtime();
    for _ in 0..ITERS {
        // Pack what the neighbours need; receive theirs into buffers.
        let send_up: Vec<f64> = g[at(1, 0)..at(2, 0)].to_vec();
        let send_down: Vec<f64> = g[at(lr - 2, 0)..at(lr - 1, 0)].to_vec();
        let send_left: Vec<f64> = (0..lr).map(|a| g[at(a, 1)]).collect();
        let send_right: Vec<f64> = (0..lr).map(|a| g[at(a, lc - 2)]).collect();
        let (mut from_up, mut from_down) = (vec![0.0; lc], vec![0.0; lc]);
        let (mut from_left, mut from_right) = (vec![0.0; lr], vec![0.0; lr]);
        request::scope(|scope| -> hmpi::Result<()> {
            let mut reqs = Vec::new();
            let links = [
                (up, &mut from_up, TAG_DOWN, &send_up, TAG_UP),
                (down, &mut from_down, TAG_UP, &send_down, TAG_DOWN),
                (left, &mut from_left, TAG_RIGHT, &send_left, TAG_LEFT),
                (right, &mut from_right, TAG_LEFT, &send_right, TAG_RIGHT),
            ];
            for (peer, inbox, in_tag, out, out_tag) in links {
                if let Some(p) = peer {
                    let p = world.process_at_rank(p);
                    reqs.push(p.immediate_receive_into_with_tag(scope, inbox, in_tag)?);
                    reqs.push(p.immediate_send_with_tag(scope, out, out_tag)?);
                }
            }
            for r in reqs {
                r.wait()?;
            }
            Ok(())
        })?;
        for b in 1..lc - 1 {
            if up.is_some() {
                g[at(0, b)] = from_up[b];
            }
            if down.is_some() {
                g[at(lr - 1, b)] = from_down[b];
            }
        }
        for a in 1..lr - 1 {
            if left.is_some() {
                g[at(a, 0)] = from_left[a];
            }
            if right.is_some() {
                g[at(a, lc - 1)] = from_right[a];
            }
        }
        for a in 1..lr - 1 {
            for b in 1..lc - 1 {
                new[at(a, b)] =
                    0.25 * (g[at(a - 1, b)] + g[at(a + 1, b)] + g[at(a, b - 1)] + g[at(a, b + 1)]);
            }
        }
        std::mem::swap(&mut g, &mut new);
    }
    let elapsed = universe.wtime() - t0;

    // Gather the interiors on rank 0 and compare with the serial result.
    let mine: Vec<f64> = (1..lr - 1)
        .flat_map(|a| (1..lc - 1).map(move |b| (a, b)))
        .map(|(a, b)| g[at(a, b)])
        .collect();
    if me != 0 {
        let root = world.process_at_rank(0);
        root.send_with_tag(&[r0 as u64, r1 as u64, c0 as u64, c1 as u64], TAG_BOUNDS)?;
        root.send_with_tag(&mine, TAG_BLOCK)?;
    } else {
        let reference = serial();
        let mut max_diff = 0.0f64;
        for r in 0..n {
            let (b, block) = if r == 0 {
                ([r0, r1, c0, c1].map(|x| x as u64), mine.clone())
            } else {
                let p = world.process_at_rank(r as i32);
                let (b, _) = p.receive_with_tag::<[u64; 4]>(TAG_BOUNDS)?;
                (b, p.receive_vec_with_tag::<f64>(TAG_BLOCK)?.0)
            };
            let [i0, i1, j0, j1] = b.map(|x| x as usize);
            let cells = (i0..i1).flat_map(|i| (j0..j1).map(move |j| (i, j)));
            for ((i, j), v) in cells.zip(&block) {
                max_diff = max_diff.max((reference[i * NY + j] - v).abs());
            }
        }
        println!(
            "stencil {NX}x{NY}, {ITERS} iterations on {n} ranks ({px}x{py}): {:.2} ms, \
             max |parallel - serial| = {max_diff:e}",
            elapsed * 1e3
        );
        if max_diff != 0.0 {
            eprintln!("stencil: the parallel result differs from the serial one");
            world.abort(2);
        }
        println!("stencil: OK");
    }
    Ok(())
}
