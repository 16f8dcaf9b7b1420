//! A stress run of two-sided messaging: many messages of random sizes
//! (log-uniform from 0 bytes to `--max-size`), random tags and
//! destinations, among all ranks and several threads per rank, every byte
//! and every message accounted for.
//!
//! Run: `cargo build --release --examples && target/release/hmpirun -n 4
//! target/release/examples/stress --messages 1000000 --max-size 4M --threads 2`
//!
//! ```text
//! stress [--messages N] [--max-size BYTES] [--seed S] [--threads T] [--self-test]
//! ```
//!
//! # What runs
//! Each rank has `T` sender threads and `T` receiver threads; pair `t` of
//! every rank talks on its own duplicate of the world, so that order can be
//! checked per (source, tag, communicator). Sender `t` of rank `s` sends
//! its share of the `N` messages; each message's destination, tag, size,
//! send mode and buffer follow from `(seed, s, t, k)` alone, `k` being its
//! number in the stream:
//!
//! * modes: blocking standard sends, synchronous sends, and groups of up to
//!   eight immediate (standard or synchronous) sends completed through a
//!   `RequestCollection` in one of four ways (`wait_all`, `wait_any`,
//!   `wait_some`, `test_all`);
//! * buffers: the node heap (single copy, synergistic when large), the
//!   stack and a static array (private memory: kernel assisted or two
//!   copy), and up to 256 bytes inline;
//! * receives, chosen at random by each receiver: wildcard (`ANY_SOURCE`,
//!   `ANY_TAG`) blocking receives, `receive_vec` and matched probes (also
//!   immediate ones), windows of four immediate wildcard receives completed
//!   as a set, and receives for a given source, tag or both, which give up
//!   after a while by cancelling (a given-key receive that waits for ever
//!   could deadlock against blocking sends; a wildcard one cannot).
//!
//! # What is checked
//! A payload is a function of `(seed, source, thread, k)`, so the receiver
//! verifies every byte and knows which message it holds. Every rank derives
//! the whole plan from the seed: each receiver knows, per (source, tag), the
//! sequence of messages it must get, in order. A received message must be
//! the next one of its (source, tag) and have the planned length and
//! content, so a lost, duplicated, reordered (within source, tag and
//! communicator) or corrupted message is an error naming it.
//!
//! # Termination
//! No end markers: from the plan, each receiver knows how many messages it
//! will get and stops after the last one; senders stop after their last
//! send completes. After a barrier, a probe on every communicator must find
//! nothing left (no extra or duplicate message), and rank 0 gathers every
//! rank's counts and checksums per peer and checks that what `s` sent to
//! `d` is what `d` received from `s`. Rank 0 then prints one line:
//! messages, bytes, elapsed seconds and MB/s. Progress goes to stderr.
//!
//! Any failure prints `stress: FAILED: …` and ends the job with exit code 1.

use hmpi::prelude::*;
use hmpi::request;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[global_allocator]
static ALLOC: shmheap::ShmHeap = shmheap::ShmHeap::new();

/// Tags messages use: a few small ones and the largest valid one.
const TAGS: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, hmpi::TAG_UB];
/// The largest message sent from (or received into) a stack buffer.
const STACK_MAX: usize = 64 << 10;
/// The largest message sent from a static buffer.
const STATIC_MAX: usize = 1 << 20;
/// Static send buffers, one per sender thread (threads beyond eight share).
static STATIC_BUFS: [Mutex<[u8; STATIC_MAX]>; 8] = [const { Mutex::new([0; STATIC_MAX]) }; 8];
/// Immediate wildcard receives posted together by a receiver's window.
const WINDOW: usize = 4;
/// Stack size of the sender and receiver threads (they hold stack buffers).
const THREAD_STACK: usize = 8 << 20;

const USAGE: &str = "usage: stress [--messages N] [--max-size BYTES (K/M/G suffixes)] [--seed S] \
                     [--threads T] [--self-test]";

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Messages in the whole job.
    pub messages: u64,
    /// The largest message in bytes.
    pub max_size: usize,
    /// The seed every rank derives the plan from.
    pub seed: u64,
    /// Sender (and receiver) threads per rank.
    pub threads: usize,
    /// Whether rank 0 reports progress on stderr.
    pub progress: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            messages: 20_000,
            max_size: 4 << 20,
            seed: 1,
            threads: 2,
            progress: true,
        }
    }
}

/// What rank 0 reports at the end.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Messages received (equal to those sent).
    pub messages: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Seconds from the first send to the last receive (between barriers).
    pub elapsed: f64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stress: {} messages, {} bytes, {:.2} s, {:.1} MB/s",
            self.messages,
            self.bytes,
            self.elapsed,
            self.bytes as f64 / self.elapsed.max(1e-9) / 1e6
        )
    }
}

fn main() {
    let cfg = match parse_args(std::env::args().skip(1)) {
        Ok(Some(c)) => c,
        Ok(None) => return,
        Err(e) => {
            eprintln!("stress: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let universe = match hmpi::init() {
        Ok(u) => u,
        Err(e) => fail(&format!("init: {e}")),
    };
    let world = universe.world();
    if world.rank() == 0 {
        eprintln!(
            "stress: {} messages of 0..={} bytes among {} ranks x {} threads, seed {}",
            cfg.messages,
            cfg.max_size,
            world.size(),
            cfg.threads,
            cfg.seed
        );
    }
    if let Some(summary) = run(&world, &cfg) {
        println!("{summary}");
    }
}

/// Parses the command line; `None` when it only asked for help or the
/// checker's self-test (done here).
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Config>, String> {
    let mut cfg = Config::default();
    let mut args = args;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--messages" => cfg.messages = parse_count(&value()?)?,
            "--max-size" => cfg.max_size = parse_size(&value()?)?,
            "--seed" => {
                let v = value()?;
                cfg.seed = v.parse().map_err(|_| format!("bad seed {v:?}"))?;
            }
            "--threads" => {
                let v = value()?;
                cfg.threads = v
                    .parse()
                    .ok()
                    .filter(|&t| (1..=64).contains(&t))
                    .ok_or_else(|| format!("bad thread count {v:?} (1..=64)"))?;
            }
            "--self-test" => {
                checker_self_test()?;
                println!("stress: the checker finds lost, extra, reordered and corrupted messages");
                return Ok(None);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(cfg))
}

/// A count such as `1000000` or `1e6`.
fn parse_count(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .or_else(|| {
            s.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1e15)
                .map(|f| f as u64)
        })
        .ok_or_else(|| format!("bad message count {s:?}"))
}

/// A size such as `4194304`, `4M`, `64K`, `4MiB`.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().trim_end_matches("iB").trim_end_matches('B');
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n <= 1 << 30)
        .ok_or_else(|| format!("bad size {s:?} (at most 1G)"))
}

/// Reports a failure and ends the job (the launcher ends the other ranks).
fn fail(msg: &str) -> ! {
    eprintln!("stress: FAILED: {msg}");
    hmpi::abort(1)
}

// ---------------------------------------------------------------- the plan

/// SplitMix64's finaliser: a bijection that mixes all bits.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The identity of message `k` of sender thread `t` of rank `s`.
fn message_key(seed: u64, s: i32, t: usize, k: u64) -> u64 {
    mix(mix(seed ^ 0x5354_5245_5353) ^ ((s as u64) << 40) ^ ((t as u64) << 24) ^ mix(k))
}

/// How a message is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A blocking standard send.
    Blocking,
    /// A blocking synchronous send.
    Synchronous,
    /// This and the next `n - 1` messages as immediate sends completed as
    /// a set (each synchronous if its `sync` says so).
    Group(u64),
}

/// Where the sender keeps a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Heap,
    Stack,
    Static,
}

/// One message of the plan, a function of `(seed, s, t, k)`.
#[derive(Debug, Clone, Copy)]
struct Msg {
    k: u64,
    dest: i32,
    tag: i32,
    size: usize,
    mode: Mode,
    /// Synchronous when sent as a member of a group.
    sync: bool,
    place: Place,
}

impl Msg {
    fn new(cfg: &Config, ranks: i32, s: i32, t: usize, k: u64) -> Msg {
        let mut r = Rng(message_key(cfg.seed, s, t, k));
        let dest = r.below(ranks as u64) as i32;
        let tag = TAGS[r.below(TAGS.len() as u64) as usize];
        // Log-uniform in 0..=max: every power of two is about as likely.
        let size = (((cfg.max_size as f64 + 1.0).powf(r.unit()) - 1.0) as usize).min(cfg.max_size);
        let mode = match r.below(100) {
            0..=44 => Mode::Blocking,
            45..=54 => Mode::Synchronous,
            _ => Mode::Group(1 + r.below(8)),
        };
        let sync = r.below(100) < 15;
        let place = match r.below(100) {
            0..=59 => Place::Heap,
            60..=79 if size <= STACK_MAX => Place::Stack,
            80..=99 if size <= STATIC_MAX => Place::Static,
            _ => Place::Heap,
        };
        Msg {
            k,
            dest,
            tag,
            size,
            mode,
            sync,
            place,
        }
    }
}

/// The number of messages sender thread `t` of rank `s` sends.
fn stream_len(cfg: &Config, ranks: i32, s: i32, t: usize) -> u64 {
    let streams = ranks as u64 * cfg.threads as u64;
    let i = s as u64 * cfg.threads as u64 + t as u64;
    cfg.messages / streams + u64::from(i < cfg.messages % streams)
}

// ---------------------------------------------------------------- payloads

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// Word `i` of the payload of the message with identity `key`.
fn word(key: u64, i: u64) -> u64 {
    (key ^ i).wrapping_mul(MUL)
}

/// Fills `buf` with the payload of `key`; returns its checksum.
fn fill(buf: &mut [u8], key: u64) -> u64 {
    let len = buf.len();
    let mut sum = (len as u64).wrapping_mul(MUL);
    let mut chunks = buf.chunks_exact_mut(8);
    for (i, c) in (&mut chunks).enumerate() {
        let w = word(key, i as u64);
        c.copy_from_slice(&w.to_le_bytes());
        sum = sum.wrapping_add(w);
    }
    let rem = chunks.into_remainder();
    if !rem.is_empty() {
        let w = word(key, (len / 8) as u64).to_le_bytes();
        rem.copy_from_slice(&w[..rem.len()]);
        sum = sum.wrapping_add(tail_value(rem));
    }
    sum
}

fn tail_value(rem: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..rem.len()].copy_from_slice(rem);
    u64::from_le_bytes(w)
}

/// Checks that `buf` is the payload of `key`; returns its checksum, or the
/// offset of the first wrong byte.
fn verify(buf: &[u8], key: u64) -> Result<u64, usize> {
    let len = buf.len();
    let mut sum = (len as u64).wrapping_mul(MUL);
    let mut chunks = buf.chunks_exact(8);
    for (i, c) in (&mut chunks).enumerate() {
        let want = word(key, i as u64);
        let got = u64::from_le_bytes(c.try_into().unwrap_or_default());
        if got != want {
            let off = (0..8).find(|&b| c[b] != want.to_le_bytes()[b]).unwrap_or(0);
            return Err(8 * i + off);
        }
        sum = sum.wrapping_add(got);
    }
    let rem = chunks.remainder();
    if !rem.is_empty() {
        let want = word(key, (len / 8) as u64).to_le_bytes();
        if let Some(b) = (0..rem.len()).find(|&b| rem[b] != want[b]) {
            return Err(len - rem.len() + b);
        }
        sum = sum.wrapping_add(tail_value(rem));
    }
    Ok(sum)
}

// ---------------------------------------------------------------- checking

/// What one receiver thread still expects, per (source, tag), in order; and
/// what it got, per source.
struct Expect {
    seed: u64,
    thread: usize,
    queues: HashMap<(i32, i32), VecDeque<(u64, usize)>>,
    remaining: u64,
    count: Vec<u64>,
    sum: Vec<u64>,
    bytes: u64,
}

impl Expect {
    /// The expectations of receiver thread `t` of rank `me`: every message
    /// of every rank's stream `t` addressed to `me`.
    fn plan(cfg: &Config, ranks: i32, me: i32, t: usize) -> Expect {
        let mut e = Expect::empty(cfg.seed, t, ranks);
        for s in 0..ranks {
            for k in 0..stream_len(cfg, ranks, s, t) {
                let m = Msg::new(cfg, ranks, s, t, k);
                if m.dest == me {
                    e.push(s, m.tag, k, m.size);
                }
            }
        }
        e
    }

    fn empty(seed: u64, thread: usize, ranks: i32) -> Expect {
        Expect {
            seed,
            thread,
            queues: HashMap::new(),
            remaining: 0,
            count: vec![0; ranks as usize],
            sum: vec![0; ranks as usize],
            bytes: 0,
        }
    }

    fn push(&mut self, src: i32, tag: i32, k: u64, size: usize) {
        self.queues
            .entry((src, tag))
            .or_default()
            .push_back((k, size));
        self.remaining += 1;
    }

    /// Accepts a received message: it must be the next one planned from
    /// `src` with `tag`, with the planned length and content.
    fn accept(&mut self, src: i32, tag: i32, data: &[u8]) -> Result<(), String> {
        let t = self.thread;
        let q = self.queues.get_mut(&(src, tag)).filter(|q| !q.is_empty());
        let Some(q) = q else {
            return Err(format!(
                "an extra or duplicate message ({} bytes) from rank {src} with tag {tag} on \
                 communicator {t}: nothing more was planned",
                data.len()
            ));
        };
        let (k, size) = q.front().copied().unwrap_or_default();
        let key = message_key(self.seed, src, t, k);
        let what = format!("message {k} of rank {src} thread {t} (tag {tag}, {size} bytes)");
        let check = if data.len() == size {
            verify(data, key).map_err(|off| format!("byte {off} is wrong"))
        } else {
            Err(format!("{} bytes arrived", data.len()))
        };
        let sum = match check {
            Ok(sum) => sum,
            Err(why) => {
                // Name the message that did arrive if it is a planned one.
                let other = q
                    .iter()
                    .skip(1)
                    .find(|&&(k2, s2)| {
                        s2 == data.len() && verify(data, message_key(self.seed, src, t, k2)).is_ok()
                    })
                    .map(|&(k2, _)| format!("; it is message {k2} (out of order)"))
                    .unwrap_or_default();
                return Err(format!("expected {what}: {why}{other}"));
            }
        };
        q.pop_front();
        self.remaining -= 1;
        self.count[src as usize] += 1;
        self.sum[src as usize] = self.sum[src as usize].wrapping_add(sum);
        self.bytes += data.len() as u64;
        Ok(())
    }

    /// The (source, tag) keys that still expect a message.
    fn open_keys(&self) -> Vec<(i32, i32)> {
        let mut v: Vec<(i32, i32)> = self
            .queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(&key, _)| key)
            .collect();
        v.sort_unstable();
        v
    }

    /// The planned size of the next message of `key`.
    fn head_size(&self, key: (i32, i32)) -> Option<usize> {
        self.queues.get(&key)?.front().map(|&(_, s)| s)
    }
}

/// The checker on made-up deliveries: it must accept the planned ones and
/// reject a corrupted, truncated, duplicated, reordered, misattributed or
/// extra message.
pub fn checker_self_test() -> Result<(), String> {
    let (seed, t) = (42, 1);
    let make = || {
        let mut e = Expect::empty(seed, t, 3);
        e.push(1, 3, 0, 100);
        e.push(1, 3, 1, 0);
        e.push(1, 3, 2, 5000);
        e.push(2, 3, 0, 64);
        e.push(1, 4, 3, 17);
        e
    };
    let payload = |src: i32, k: u64, size: usize| {
        let mut v = vec![0u8; size];
        fill(&mut v, message_key(seed, src, t, k));
        v
    };
    let must = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("checker self-test: {what}"))
        }
    };
    // Everything as planned, interleaved across keys.
    let mut e = make();
    e.accept(1, 4, &payload(1, 3, 17))?;
    e.accept(1, 3, &payload(1, 0, 100))?;
    e.accept(2, 3, &payload(2, 0, 64))?;
    e.accept(1, 3, &payload(1, 1, 0))?;
    e.accept(1, 3, &payload(1, 2, 5000))?;
    must(
        e.remaining == 0 && e.count == [0, 4, 1],
        "counts after the planned messages",
    )?;
    must(
        e.accept(1, 3, &payload(1, 2, 5000)).is_err(),
        "accepted an extra message",
    )?;
    let mut e = make();
    let mut bad = payload(1, 0, 100);
    bad[77] ^= 1;
    must(
        e.accept(1, 3, &bad).is_err(),
        "accepted a corrupted message",
    )?;
    let mut e = make();
    must(
        e.accept(1, 3, &payload(1, 0, 100)[..99]).is_err(),
        "accepted a truncated message",
    )?;
    let mut e = make();
    e.accept(1, 3, &payload(1, 0, 100))?;
    must(
        e.accept(1, 3, &payload(1, 0, 100)).is_err(),
        "accepted a duplicate",
    )?;
    let mut e = make();
    e.accept(1, 3, &payload(1, 0, 100))?;
    let r = e.accept(1, 3, &payload(1, 2, 5000));
    must(
        r.as_ref().is_err_and(|m| m.contains("out of order")),
        "accepted a reordered message",
    )?;
    let mut e = make();
    must(
        e.accept(2, 3, &payload(1, 0, 64)).is_err(),
        "accepted another source's message",
    )?;
    let mut e = make();
    must(
        e.accept(0, 3, &payload(0, 0, 8)).is_err(),
        "accepted an unplanned source",
    )?;
    Ok(())
}

// ---------------------------------------------------------------- running

/// Counts and checksums per peer rank.
#[derive(Debug, Clone, Default)]
struct Tally {
    count: Vec<u64>,
    sum: Vec<u64>,
    bytes: u64,
}

impl Tally {
    fn new(ranks: i32) -> Tally {
        Tally {
            count: vec![0; ranks as usize],
            sum: vec![0; ranks as usize],
            bytes: 0,
        }
    }
    fn add(&mut self, other: &Tally) {
        for (a, b) in self.count.iter_mut().zip(&other.count) {
            *a += b;
        }
        for (a, b) in self.sum.iter_mut().zip(&other.sum) {
            *a = a.wrapping_add(*b);
        }
        self.bytes += other.bytes;
    }
    fn record(&mut self, peer: i32, sum: u64, bytes: usize) {
        self.count[peer as usize] += 1;
        self.sum[peer as usize] = self.sum[peer as usize].wrapping_add(sum);
        self.bytes += bytes as u64;
    }
}

/// Rank 0's progress report.
struct Progress {
    on: bool,
    done: AtomicU64,
    total: u64,
    start: f64,
}

impl Progress {
    fn tick(&self) {
        if !self.on || self.total == 0 {
            return;
        }
        // Relaxed: a counter for the report; nothing is published by it.
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if n * 20 / self.total != (n - 1) * 20 / self.total {
            eprintln!(
                "stress: rank 0 has received {n}/{} messages ({}%) after {:.1} s",
                self.total,
                n * 100 / self.total,
                hmpi::time() - self.start
            );
        }
    }
}

/// Runs the stress on every rank of `world` (collective); rank 0 returns
/// the summary. Any failure prints `stress: FAILED: …` and ends the job.
pub fn run(world: &SimpleCommunicator, cfg: &Config) -> Option<Summary> {
    let (me, n) = (world.rank(), world.size());
    let t_count = cfg.threads.max(1);
    let comms: Vec<SimpleCommunicator> = (0..t_count)
        .map(|_| {
            world
                .duplicate()
                .unwrap_or_else(|e| fail(&format!("duplicate: {e}")))
        })
        .collect();
    let plans: Vec<Expect> = (0..t_count).map(|t| Expect::plan(cfg, n, me, t)).collect();
    let progress = Progress {
        on: cfg.progress && me == 0,
        done: AtomicU64::new(0),
        total: plans.iter().map(|p| p.remaining).sum(),
        start: 0.0,
    };
    let ok = |r: hmpi::Result<()>, what: &str| r.unwrap_or_else(|e| fail(&format!("{what}: {e}")));
    ok(world.barrier(), "barrier");
    let start = hmpi::time();
    let progress = Progress { start, ..progress };
    let (sent, received) = std::thread::scope(|ts| {
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for (t, (comm, plan)) in comms.iter().zip(plans).enumerate() {
            let progress = &progress;
            let spawn = |name: String| {
                std::thread::Builder::new()
                    .name(name)
                    .stack_size(THREAD_STACK)
            };
            senders.push(
                spawn(format!("send-{t}"))
                    .spawn_scoped(ts, move || send_stream(comm, cfg, t))
                    .unwrap_or_else(|e| fail(&format!("spawn: {e}"))),
            );
            receivers.push(
                spawn(format!("recv-{t}"))
                    .spawn_scoped(ts, move || receive_stream(comm, cfg, plan, progress))
                    .unwrap_or_else(|e| fail(&format!("spawn: {e}"))),
            );
        }
        let join = |h: std::thread::ScopedJoinHandle<'_, Tally>| {
            h.join().unwrap_or_else(|_| fail("a thread panicked"))
        };
        let mut sent = Tally::new(n);
        let mut received = Tally::new(n);
        for h in senders {
            sent.add(&join(h));
        }
        for h in receivers {
            received.add(&join(h));
        }
        (sent, received)
    });
    ok(world.barrier(), "barrier");
    let elapsed = hmpi::time() - start;
    // Every message planned was received; anything still queued is extra.
    for (t, c) in comms.iter().enumerate() {
        match c.any_process().immediate_probe() {
            Ok(None) => {}
            Ok(Some(st)) => fail(&format!(
                "an extra message ({} bytes, tag {}) from rank {} on communicator {t} after \
                 every planned one was received",
                st.byte_count(),
                st.tag(),
                st.source_rank()
            )),
            Err(e) => fail(&format!("probe: {e}")),
        }
    }
    // Rank 0 checks that what s sent to d is what d received from s.
    let mine: Vec<u64> = [&sent.count, &sent.sum, &received.count, &received.sum]
        .into_iter()
        .flatten()
        .copied()
        .chain([received.bytes])
        .collect();
    let zero = world.process_at_rank(0);
    if me != 0 {
        ok(zero.send_with_tag(&mine, 1), "sending the tallies");
        ok(world.barrier(), "barrier");
        return None;
    }
    let nu = n as usize;
    let mut all = vec![mine];
    for r in 1..n {
        let (v, _) = world
            .process_at_rank(r)
            .receive_vec_with_tag::<u64>(1)
            .unwrap_or_else(|e| fail(&format!("receiving the tallies: {e}")));
        if v.len() != 4 * nu + 1 {
            fail(&format!("rank {r} sent {} tally words", v.len()));
        }
        all.push(v);
    }
    let (mut messages, mut bytes) = (0, 0);
    for s in 0..nu {
        for d in 0..nu {
            let (sc, ss) = (all[s][d], all[s][nu + d]);
            let (rc, rs) = (all[d][2 * nu + s], all[d][3 * nu + s]);
            if (sc, ss) != (rc, rs) {
                fail(&format!(
                    "rank {s} sent {sc} messages (checksum {ss:#x}) to rank {d}, which \
                     received {rc} (checksum {rs:#x})"
                ));
            }
            messages += rc;
        }
        bytes += all[s][4 * nu];
    }
    if messages != cfg.messages {
        fail(&format!(
            "{messages} messages received, {} planned",
            cfg.messages
        ));
    }
    ok(world.barrier(), "barrier");
    Some(Summary {
        messages,
        bytes,
        elapsed,
    })
}

/// Sends stream `t` of this rank; returns what it sent, per destination.
fn send_stream(comm: &SimpleCommunicator, cfg: &Config, t: usize) -> Tally {
    let (me, n) = (comm.rank(), comm.size());
    let len = stream_len(cfg, n, me, t);
    let mut tally = Tally::new(n);
    let mut k = 0;
    while k < len {
        let m = Msg::new(cfg, n, me, t, k);
        match m.mode {
            Mode::Blocking | Mode::Synchronous => {
                send_one(comm, cfg, t, &m, &mut tally);
                k += 1;
            }
            Mode::Group(g) => {
                let g = g.min(len - k);
                let group: Vec<Msg> = (k..k + g).map(|k| Msg::new(cfg, n, me, t, k)).collect();
                send_group(comm, cfg, t, &group, &mut tally);
                k += g;
            }
        }
    }
    tally
}

fn send_one(comm: &SimpleCommunicator, cfg: &Config, t: usize, m: &Msg, tally: &mut Tally) {
    let key = message_key(cfg.seed, comm.rank(), t, m.k);
    let p = comm.process_at_rank(m.dest);
    let send = |buf: &[u8]| {
        if m.mode == Mode::Synchronous {
            p.synchronous_send_with_tag(buf, m.tag)
        } else {
            p.send_with_tag(buf, m.tag)
        }
    };
    let (sum, r) = match m.place {
        Place::Heap => {
            let mut v = vec![0u8; m.size];
            let sum = fill(&mut v, key);
            (sum, send(&v))
        }
        Place::Stack => {
            let mut a = [0u8; STACK_MAX];
            let sum = fill(&mut a[..m.size], key);
            (sum, send(&a[..m.size]))
        }
        Place::Static => {
            let mut g = STATIC_BUFS[t % STATIC_BUFS.len()]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let sum = fill(&mut g[..m.size], key);
            (sum, send(&g[..m.size]))
        }
    };
    if let Err(e) = r {
        fail(&format!("send of message {} to rank {}: {e}", m.k, m.dest));
    }
    tally.record(m.dest, sum, m.size);
}

/// Sends a group as immediate sends and completes them as a set.
fn send_group(comm: &SimpleCommunicator, cfg: &Config, t: usize, group: &[Msg], tally: &mut Tally) {
    let me = comm.rank();
    // At most one member on the stack and one in the static buffer.
    let mut places = Vec::with_capacity(group.len());
    let (mut stack_used, mut static_used) = (false, false);
    for m in group {
        let p = match m.place {
            Place::Stack if !stack_used => {
                stack_used = true;
                Place::Stack
            }
            Place::Static if !static_used => {
                static_used = true;
                Place::Static
            }
            _ => Place::Heap,
        };
        places.push(p);
    }
    let mut stack = [0u8; STACK_MAX];
    let mut guard = static_used.then(|| {
        STATIC_BUFS[t % STATIC_BUFS.len()]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    });
    let mut heap: Vec<Vec<u8>> = Vec::new();
    let mut sums = Vec::with_capacity(group.len());
    for (m, &p) in group.iter().zip(&places) {
        let key = message_key(cfg.seed, me, t, m.k);
        let sum = match p {
            Place::Heap => {
                let mut v = vec![0u8; m.size];
                let s = fill(&mut v, key);
                heap.push(v);
                s
            }
            Place::Stack => fill(&mut stack[..m.size], key),
            Place::Static => match guard.as_mut() {
                Some(g) => fill(&mut g[..m.size], key),
                None => fail("the static buffer is not held"),
            },
        };
        sums.push(sum);
    }
    let how = Rng(message_key(cfg.seed, me, t, group[0].k) ^ 0xc0).below(4);
    let (stack, static_buf, heap) = (&stack, guard.as_deref(), &heap);
    request::multiple_scope(group.len(), |scope, coll| {
        let mut h = 0;
        for (m, &p) in group.iter().zip(&places) {
            let buf: &[u8] = match p {
                Place::Heap => {
                    h += 1;
                    &heap[h - 1]
                }
                Place::Stack => &stack[..m.size],
                Place::Static => match static_buf {
                    Some(b) => &b[..m.size],
                    None => fail("the static buffer is not held"),
                },
            };
            let dest = comm.process_at_rank(m.dest);
            let r = if m.sync {
                dest.immediate_synchronous_send_with_tag(scope, buf, m.tag)
            } else {
                dest.immediate_send_with_tag(scope, buf, m.tag)
            };
            coll.add(
                r.unwrap_or_else(|e| fail(&format!("immediate send of message {}: {e}", m.k))),
            );
        }
        complete(coll, how, "send");
    });
    for (m, sum) in group.iter().zip(sums) {
        tally.record(m.dest, sum, m.size);
    }
}

/// Completes every request of `coll` in one of four ways; any failure
/// ends the job. Returns the outcomes by index.
fn complete(coll: &mut RequestCollection<'_>, how: u64, what: &str) -> Vec<Option<Status>> {
    let mut out: Vec<Option<Status>> = vec![None; coll.len()];
    let mut take = |(i, r): (usize, hmpi::Result<Status>)| match r {
        Ok(st) => out[i] = Some(st),
        Err(e) => fail(&format!("{what} {i} of a set: {e}")),
    };
    let mut result = Vec::new();
    match how {
        0 => {
            coll.wait_all(&mut result);
            result.drain(..).for_each(&mut take);
        }
        1 => {
            while let Some(done) = coll.wait_any() {
                take(done);
            }
        }
        2 => {
            while coll.incomplete() > 0 {
                coll.wait_some(&mut result);
                result.drain(..).for_each(&mut take);
            }
        }
        _ => {
            let mut spins = 0u32;
            while !coll.test_all(&mut result) {
                spins += 1;
                if spins % 64 == 0 {
                    std::thread::yield_now();
                }
            }
            result.drain(..).for_each(&mut take);
        }
    }
    out
}

/// Receives everything planned for receiver thread `t`; returns what it
/// got, per source.
fn receive_stream(
    comm: &SimpleCommunicator,
    cfg: &Config,
    mut e: Expect,
    progress: &Progress,
) -> Tally {
    let me = comm.rank();
    let mut rng = Rng(mix(cfg.seed ^ 0x7265_6376) ^ ((me as u64) << 32) ^ e.thread as u64);
    let cap = cfg.max_size.max(1);
    let mut big = vec![0u8; cap];
    let mut window: Vec<Vec<u8>> = (0..WINDOW).map(|_| vec![0u8; cap]).collect();
    let mut stack = [0u8; STACK_MAX];
    let any = comm.any_process();
    let or_fail =
        |r: hmpi::Result<Status>, what: &str| r.unwrap_or_else(|e| fail(&format!("{what}: {e}")));
    while e.remaining > 0 {
        let before = e.remaining;
        match rng.below(100) {
            // A blocking wildcard receive.
            0..=24 => {
                let st = or_fail(any.receive_into(&mut big[..]), "receive");
                take(&mut e, &st, &big)
            }
            // receive_vec: a matched probe and its receive.
            25..=39 => {
                let (v, st) = any
                    .receive_vec::<u8>()
                    .unwrap_or_else(|err| fail(&format!("receive_vec: {err}")));
                take(&mut e, &st, &v)
            }
            // A matched probe (blocking or polled) into the big buffer.
            40..=54 => {
                let (m, st) = if rng.below(2) == 0 {
                    any.matched_probe()
                        .unwrap_or_else(|err| fail(&format!("matched_probe: {err}")))
                } else {
                    loop {
                        match any.immediate_matched_probe() {
                            Ok(Some(found)) => break found,
                            Ok(None) => std::thread::yield_now(),
                            Err(err) => fail(&format!("immediate_matched_probe: {err}")),
                        }
                    }
                };
                let st2 = or_fail(m.matched_receive_into(&mut big[..]), "matched receive");
                if st2 != st {
                    fail(&format!(
                        "matched receive status {st2:?}, probe said {st:?}"
                    ));
                }
                take(&mut e, &st, &big)
            }
            // A window of immediate wildcard receives, completed as a set and
            // checked in the order posted (the order they matched in).
            55..=69 => {
                let w = (e.remaining as usize).min(WINDOW);
                let how = rng.below(4);
                let outcomes = request::multiple_scope(w, |scope, coll| {
                    for b in window.iter_mut().take(w) {
                        let r = any
                            .immediate_receive_into(scope, &mut b[..])
                            .unwrap_or_else(|err| fail(&format!("immediate receive: {err}")));
                        coll.add(r);
                    }
                    complete(coll, how, "receive")
                });
                for (st, b) in outcomes.iter().zip(&window) {
                    match st {
                        Some(st) => take(&mut e, st, b),
                        None => fail("a receive of a window was not reported"),
                    }
                }
            }
            // A given source, tag, or both; cancelled if it takes long.
            _ => {
                let keys = e.open_keys();
                let (src, tag) = keys[rng.below(keys.len() as u64) as usize];
                let (src, tag, on_stack) = match rng.below(3) {
                    0 => (
                        src,
                        tag,
                        e.head_size((src, tag)).is_some_and(|s| s <= STACK_MAX),
                    ),
                    1 => (src, hmpi::ANY_TAG, false),
                    _ => (hmpi::ANY_SOURCE, tag, false),
                };
                let buf: &mut [u8] = if on_stack {
                    &mut stack[..]
                } else {
                    &mut big[..]
                };
                let got = request::scope(|scope| {
                    let r = if src == hmpi::ANY_SOURCE {
                        any.immediate_receive_into_with_tag(scope, &mut *buf, tag)
                    } else {
                        comm.process_at_rank(src)
                            .immediate_receive_into_with_tag(scope, &mut *buf, tag)
                    };
                    let mut r = r.unwrap_or_else(|err| fail(&format!("immediate receive: {err}")));
                    for i in 0..256u32 {
                        match r.test() {
                            Ok(Some(st)) => return Some(st),
                            Ok(None) if i % 16 == 15 => std::thread::yield_now(),
                            Ok(None) => {}
                            Err(err) => fail(&format!("test: {err}")),
                        }
                    }
                    if r.cancel() {
                        let st = or_fail(r.wait(), "cancelled receive");
                        if !st.is_cancelled() {
                            fail("a cancelled receive's status is not cancelled");
                        }
                        return None;
                    }
                    Some(or_fail(r.wait(), "receive"))
                });
                if let Some(st) = got {
                    if (src != hmpi::ANY_SOURCE && st.source_rank() != src)
                        || (tag != hmpi::ANY_TAG && st.tag() != tag)
                    {
                        fail(&format!(
                            "a receive for rank {src} tag {tag} got rank {} tag {}",
                            st.source_rank(),
                            st.tag()
                        ));
                    }
                    take(&mut e, &st, buf);
                }
            }
        }
        for _ in e.remaining..before {
            progress.tick();
        }
    }
    let mut tally = Tally::new(comm.size());
    tally.count = e.count;
    tally.sum = e.sum;
    tally.bytes = e.bytes;
    tally
}

/// Checks a received message against the plan (or ends the job).
fn take(e: &mut Expect, st: &Status, buf: &[u8]) {
    let len = usize::try_from(st.byte_count()).unwrap_or(usize::MAX);
    let Some(data) = buf.get(..len) else {
        fail(&format!(
            "a status of {len} bytes for a buffer of {}",
            buf.len()
        ))
    };
    if let Err(msg) = e.accept(st.source_rank(), st.tag(), data) {
        fail(&msg);
    }
}
