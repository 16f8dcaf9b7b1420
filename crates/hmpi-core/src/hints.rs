//! Communicator hints that free the VCI mapping, and the mapping itself.
//!
//! Without hints, every message of a communicator travels on one VCI of
//! each rank (its context modulo `HMPI_VCIS`, see `vci::config`), so the
//! threads that share a communicator share one stream. MPI lets a program
//! promise more with info keys; [`CommHints`] is their typed form, and a
//! communicator holds what is in effect in a [`VciMap`], read on every
//! point-to-point operation ([`SimpleCommunicator::send_context`],
//! [`SimpleCommunicator::recv_context`]):
//!
//! | key | value | effect |
//! |---|---|---|
//! | `mpi_assert_no_any_source` | `true`/`false` | the VCI follows the sender's rank; a receive or probe from `ANY_SOURCE` is an error |
//! | `mpi_assert_no_any_tag` | `true`/`false` | the VCI follows the tag; a receive or probe with `ANY_TAG` is an error |
//! | `hmpi_vci_tag_bits_send` | `lo:len` | tag bits `lo..lo+len` hold the sender's thread index |
//! | `hmpi_vci_tag_bits_recv` | `lo:len` | tag bits `lo..lo+len` hold the receiver's thread index |
//! | `mpi_assert_allow_overtaking` | `true`/`false` | a send travels on its thread's VCI; receives and probes look on every VCI |
//! | `mpi_assert_exact_length` | `true`/`false` | accepted and reported; changes nothing in this engine (below) |
//!
//! With `k` the communicator's context id, `n` the VCIs per rank, `s` the
//! sender's communicator rank, `t` the tag, `a` and `b` the sender's and
//! the receiver's tag bits (`la` the sender field's length), a message
//! travels on VCI
//!
//! * with tag bits (either key): `(k + a + b·2^la) mod n`, so that the
//!   pair of threads (sender thread, receiver thread) picks the stream;
//!   `ANY_TAG` is an error (the tag decides the VCI);
//! * with `allow_overtaking` (and no tag bits): `(c + i) mod n`, with `c`
//!   the context word and `i` the sending thread's index
//!   ([`vci::endpoint::thread_index`]: the lowest index no other live
//!   thread of the process holds), so that `n` threads sending on one
//!   communicator use `n` streams; a receive or probe names every VCI
//!   ([`vci::endpoint::on_every_vci`]);
//! * with `no_any_source` and `no_any_tag`: `(k + s + t) mod n`;
//! * with `no_any_source` alone: `(k + s) mod n`;
//! * with `no_any_tag` alone: `(k + t) mod n`;
//! * otherwise: as without hints.
//!
//! Each rule but `allow_overtaking`'s depends only on what both the sender
//! and every receive that may match know, so a message and its receive
//! always meet on one VCI, and messages with the same source and tag keep
//! their order (MPI's non-overtaking rule holds for every receive the hints
//! allow). A receive that breaks its communicator's hint is
//! [`Error::Arg`], never a silent mismatch.
//!
//! With `allow_overtaking` only the sender knows its thread, so the engine
//! posts a receive on every VCI at once, one part per VCI sharing a claim
//! word: the first part to match (under its VCI's lock) claims the
//! receive, the others are withdrawn, and a matched probe takes its
//! message off one VCI's list. Every message is received exactly once, a
//! receive is matchable as soon as it is posted (so a receive posted
//! before a send that waits for its own match cannot deadlock), and
//! `ANY_SOURCE` and `ANY_TAG` work; what is lost is order between the
//! messages of one sender that went on different VCIs, which the hint
//! gives up (the engine's `spread` module has the details). The receive
//! side pays for it: a receive takes up to `n` VCI locks to post and as
//! many to withdraw, so the hint pays where senders are many threads and
//! a message usually waits on the receiving thread's own VCI (the first a
//! receive looks at). With no-wildcard hints as well, the wildcards stay
//! errors (what the program promised); with tag bits, the tag bits decide
//! (the receive then knows its VCI).
//!
//! `exact_length` changes nothing in this engine: the sender picks the
//! protocol (fast box, inline, single copy, kernel assisted, bounce
//! buffer) from the message alone, before any receive is known; the
//! receiver reads the length from the header it matches on (the fast-box
//! slot's or the envelope's first line) and copies `min(length, buffer)`,
//! so the truncation check is one comparison of values already loaded;
//! and no size is negotiated between the ranks that the hint could let a
//! receive skip. It is kept and reported.
//!
//! Hints are collective: every member sets the same ones (as MPI asks of
//! the `mpi_assert_*` keys), and changes them (`MPI_Comm_set_info`) only
//! while it has no point-to-point operation pending on the communicator.
//! A key with a malformed value is [`Error::InfoValue`]; other keys are
//! kept as they are, for the layers that read them.
//!
//! A stream communicator ([`crate::stream`]) maps to its members' stream
//! VCIs instead of by hints.
//!
//! # Example
//! ```
//! use hmpi_core::hints::{CommHints, TagBits};
//! use hmpi_core::Info;
//!
//! let h = CommHints {
//!     no_any_source: true,
//!     tag_bits_send: Some(TagBits { lo: 0, len: 2 }),
//!     tag_bits_recv: Some(TagBits { lo: 2, len: 2 }),
//!     ..CommHints::default()
//! };
//! let info = h.to_info();
//! assert_eq!(info.get("hmpi_vci_tag_bits_recv"), Some("2:2"));
//! assert_eq!(CommHints::from_info(&info).unwrap(), h);
//! let mut bad = Info::new();
//! bad.set("mpi_assert_no_any_tag", "perhaps").unwrap();
//! assert!(CommHints::from_info(&bad).is_err());
//! ```
//!
//! [`SimpleCommunicator::send_context`]: crate::SimpleCommunicator::send_context
//! [`SimpleCommunicator::recv_context`]: crate::SimpleCommunicator::recv_context

use crate::error::{Error, Result};
use crate::info::Info;
use crate::stream::StreamVci;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use vci::endpoint::on_vci;
use vci::{ANY_SOURCE, ANY_TAG};

/// Key: no receive of the communicator uses `ANY_SOURCE`.
pub const NO_ANY_SOURCE: &str = "mpi_assert_no_any_source";
/// Key: no receive of the communicator uses `ANY_TAG`.
pub const NO_ANY_TAG: &str = "mpi_assert_no_any_tag";
/// Key: the program does not rely on messages not overtaking each other.
pub const ALLOW_OVERTAKING: &str = "mpi_assert_allow_overtaking";
/// Key: every receive's buffer is as long as its message.
pub const EXACT_LENGTH: &str = "mpi_assert_exact_length";
/// Key: which tag bits (`lo:len`) hold the sending thread's index.
pub const TAG_BITS_SEND: &str = "hmpi_vci_tag_bits_send";
/// Key: which tag bits (`lo:len`) hold the receiving thread's index.
pub const TAG_BITS_RECV: &str = "hmpi_vci_tag_bits_recv";

/// Every key the mapping reads.
pub const KEYS: [&str; 6] = [
    NO_ANY_SOURCE,
    NO_ANY_TAG,
    ALLOW_OVERTAKING,
    EXACT_LENGTH,
    TAG_BITS_SEND,
    TAG_BITS_RECV,
];

/// The number of usable tag bits (tags are `0..=TAG_UB`, 2^30 − 1).
const TAG_BITS: u8 = 30;
/// The longest thread-index field (more threads than VCIs gain nothing).
const FIELD_MAX: u8 = 8;

/// A field of tag bits: bits `lo..lo + len` (`len` ≥ 1, `lo + len` ≤ 30,
/// `len` ≤ 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagBits {
    /// The lowest bit of the field.
    pub lo: u8,
    /// The number of bits.
    pub len: u8,
}

impl TagBits {
    /// The field's value in `tag`.
    #[inline(always)]
    pub fn of(self, tag: i32) -> u32 {
        ((tag as u32) >> self.lo) & ((1u32 << self.len) - 1)
    }

    fn parse(key: &str, v: &str) -> Result<TagBits> {
        let bad = || Error::InfoValue {
            reason: format!(
                "{key}={v}: expected lo:len, tag bits lo..lo+len with 1 <= len <= \
                 {FIELD_MAX} and lo+len <= {TAG_BITS}"
            ),
        };
        let (lo, len) = v.trim().split_once(':').ok_or_else(bad)?;
        let lo: u8 = lo.trim().parse().map_err(|_| bad())?;
        let len: u8 = len.trim().parse().map_err(|_| bad())?;
        if len == 0 || len > FIELD_MAX || lo.checked_add(len).is_none_or(|e| e > TAG_BITS) {
            return Err(bad());
        }
        Ok(TagBits { lo, len })
    }
}

/// The hints of a communicator that the VCI mapping reads (see the module
/// docs), typed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommHints {
    /// `mpi_assert_no_any_source`.
    pub no_any_source: bool,
    /// `mpi_assert_no_any_tag`.
    pub no_any_tag: bool,
    /// `mpi_assert_allow_overtaking`: sends travel on their thread's VCI,
    /// receives look on every VCI.
    pub allow_overtaking: bool,
    /// `mpi_assert_exact_length` (kept and reported; nothing in this
    /// engine gains from it, see the module docs).
    pub exact_length: bool,
    /// `hmpi_vci_tag_bits_send`: the tag bits of the sender's thread.
    pub tag_bits_send: Option<TagBits>,
    /// `hmpi_vci_tag_bits_recv`: the tag bits of the receiver's thread.
    pub tag_bits_recv: Option<TagBits>,
}

fn flag(key: &str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InfoValue {
            reason: format!("{key}={v}: expected true or false"),
        }),
    }
}

impl CommHints {
    /// The hints `info` sets (other keys are ignored); [`Error::InfoValue`]
    /// for a malformed value of one of the keys above.
    pub fn from_info(info: &Info) -> Result<CommHints> {
        let mut h = CommHints::default();
        for (k, v) in info.iter() {
            match k {
                NO_ANY_SOURCE => h.no_any_source = flag(k, v)?,
                NO_ANY_TAG => h.no_any_tag = flag(k, v)?,
                ALLOW_OVERTAKING => h.allow_overtaking = flag(k, v)?,
                EXACT_LENGTH => h.exact_length = flag(k, v)?,
                TAG_BITS_SEND => h.tag_bits_send = Some(TagBits::parse(k, v)?),
                TAG_BITS_RECV => h.tag_bits_recv = Some(TagBits::parse(k, v)?),
                _ => {}
            }
        }
        Ok(h)
    }

    /// Writes these hints into `info` in their canonical form (flags as
    /// `true`/`false`, fields as `lo:len`), replacing what it held under
    /// the same keys; unset fields are removed.
    pub fn write_into(&self, info: &mut Info) {
        let flags = [
            (NO_ANY_SOURCE, self.no_any_source),
            (NO_ANY_TAG, self.no_any_tag),
            (ALLOW_OVERTAKING, self.allow_overtaking),
            (EXACT_LENGTH, self.exact_length),
        ];
        for (k, on) in flags {
            if on || info.get(k).is_some() {
                // A valid key and value: cannot fail.
                let _ = info.set(k, if on { "true" } else { "false" });
            }
        }
        for (k, f) in [
            (TAG_BITS_SEND, self.tag_bits_send),
            (TAG_BITS_RECV, self.tag_bits_recv),
        ] {
            match f {
                Some(b) => {
                    let _ = info.set(k, &format!("{}:{}", b.lo, b.len));
                }
                None => {
                    let _ = info.delete(k);
                }
            }
        }
    }

    /// These hints as an info object.
    pub fn to_info(&self) -> Info {
        let mut i = Info::new();
        self.write_into(&mut i);
        i
    }

    fn encode(&self) -> u64 {
        let mut w = 0;
        if self.no_any_source {
            w |= W_NO_ANY_SOURCE;
        }
        if self.no_any_tag {
            w |= W_NO_ANY_TAG;
        }
        if self.tag_bits_send.is_some() || self.tag_bits_recv.is_some() {
            w |= W_TAG_BITS;
        }
        if self.allow_overtaking {
            w |= W_OVERTAKE;
        }
        let field = |f: Option<TagBits>| f.map_or(0, |b| u64::from(b.lo) | u64::from(b.len) << 8);
        w | field(self.tag_bits_send) << 16 | field(self.tag_bits_recv) << 32
    }
}

const W_NO_ANY_SOURCE: u64 = 1;
const W_NO_ANY_TAG: u64 = 2;
const W_TAG_BITS: u64 = 4;
const W_STREAM: u64 = 8;
const W_OVERTAKE: u64 = 16;

fn field_at(w: u64, shift: u32) -> Option<TagBits> {
    let len = (w >> (shift + 8)) as u8;
    (len > 0).then(|| TagBits {
        lo: (w >> shift) as u8,
        len,
    })
}

/// The VCI mapping in effect on one communicator: a word encoding its
/// hints (0: none, the fast path), and for a stream communicator the
/// stream VCI of each member.
#[derive(Debug, Default)]
pub(crate) struct VciMap {
    word: AtomicU64,
    /// A stream communicator's members' VCIs and this rank's stream (kept
    /// reserved while the communicator lives).
    stream: OnceLock<Streams>,
}

/// A stream communicator's members' stream VCIs, by communicator rank,
/// and this rank's stream.
#[derive(Debug)]
struct Streams {
    vcis: Box<[u8]>,
    /// The VCI bits of a context word to each member ([`on_vci`]'s with
    /// context 0; 0 with one VCI per rank), computed once: a message's
    /// word is its context with these bits, the whole of the stream path.
    bits: Box<[u32]>,
    _hold: Option<Arc<StreamVci>>,
}

impl VciMap {
    /// Puts `h` in effect (a stream communicator keeps its streams).
    pub(crate) fn set(&self, h: &CommHints) {
        let keep = self.word.load(Ordering::Relaxed) & W_STREAM;
        // Relaxed: the word is self-contained (no other data is published
        // through it), and hints change only while no operation of the
        // communicator is pending (module docs); a thread that starts one
        // later was ordered after the change by whatever told it to start.
        self.word.store(h.encode() | keep, Ordering::Relaxed);
    }

    /// Binds the communicator to its members' stream VCIs, by
    /// communicator rank (once), on a rank with `vci_count` VCIs.
    pub(crate) fn set_stream(
        &self,
        vcis: Box<[u8]>,
        vci_count: usize,
        hold: Option<Arc<StreamVci>>,
    ) -> Result<()> {
        let bits = vcis
            .iter()
            .map(|&v| match vci_count {
                // One VCI: nothing to spread.
                1 => 0,
                _ => on_vci(0, usize::from(v)),
            })
            .collect();
        self.stream
            .set(Streams {
                vcis,
                bits,
                _hold: hold,
            })
            .map_err(|_| Error::Internal("a communicator bound to streams twice".into()))?;
        // Relaxed: as in `set`; the table itself is published by the
        // OnceLock (a reader that sees the bit finds it set, and one that
        // does not only uses the hints).
        self.word.fetch_or(W_STREAM, Ordering::Relaxed);
        Ok(())
    }

    /// The stream VCI of each member, if this is a stream communicator.
    pub(crate) fn stream(&self) -> Option<&[u8]> {
        self.stream.get().map(|s| &s.vcis[..])
    }

    #[inline(always)]
    fn word(&self) -> u64 {
        // Relaxed: see `set`.
        self.word.load(Ordering::Relaxed)
    }

    /// The context word of a send from `me` to `dest` (communicator ranks)
    /// with `tag`, on context `ctx` of context id `k`.
    #[inline(always)]
    pub(crate) fn send_word(&self, ctx: u32, k: u32, me: i32, dest: i32, tag: i32) -> u32 {
        match self.word() {
            0 => ctx,
            w if w & W_STREAM != 0 => self.stream_word(ctx, dest),
            w => self.mapped(w, ctx, k, me, tag, false),
        }
    }

    /// The context word of a message of a stream communicator to `dest`
    /// (the receiving member, communicator rank): on `dest`'s stream VCI.
    /// Inline, not in the cold [`VciMap::mapped`]: on a stream
    /// communicator it is every message's path.
    #[inline(always)]
    fn stream_word(&self, ctx: u32, dest: i32) -> u32 {
        // A negative rank is far out of range as a usize.
        match self.stream.get().and_then(|s| s.bits.get(dest as usize)) {
            Some(&b) => crate::endpoints::with_bits(ctx, b),
            // PROC_NULL: the engine sends nowhere.
            None => ctx,
        }
    }

    /// The context word of a receive or probe by `me` from `source` with
    /// `tag` (either may be a wildcard): [`Error::Arg`] if a hint forbids
    /// the wildcard.
    #[inline(always)]
    pub(crate) fn recv_word(
        &self,
        ctx: u32,
        k: u32,
        me: i32,
        source: i32,
        tag: i32,
    ) -> Result<u32> {
        match self.word() {
            0 => Ok(ctx),
            // The message came from `source` to `me`, on `me`'s stream.
            w if w & W_STREAM != 0 => Ok(self.stream_word(ctx, me)),
            w => {
                if source == ANY_SOURCE && w & W_NO_ANY_SOURCE != 0 {
                    return Err(broken(NO_ANY_SOURCE, "ANY_SOURCE"));
                }
                if tag == ANY_TAG && w & (W_NO_ANY_TAG | W_TAG_BITS) != 0 {
                    let key = if w & W_TAG_BITS != 0 {
                        "tag bits"
                    } else {
                        NO_ANY_TAG
                    };
                    return Err(broken(key, "ANY_TAG"));
                }
                // The message came from `source` to `me`.
                Ok(self.mapped(w, ctx, k, source, tag, true))
            }
        }
    }

    /// The context word of a message from `src` with `tag` under hint
    /// word `w` (not a stream communicator's: see
    /// [`VciMap::stream_word`]): for a receive or probe if `recv`.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn mapped(&self, w: u64, ctx: u32, k: u32, src: i32, tag: i32, recv: bool) -> u32 {
        let (ep, n) = match crate::environment::endpoint() {
            Ok(ep) if ep.vci_count() > 1 => (ep, ep.vci_count() as u64),
            // One VCI: nothing to spread (the hints' checks still hold).
            _ => return ctx,
        };
        let k = u64::from(k);
        let v = if w & W_TAG_BITS != 0 {
            let a = field_at(w, 16).map_or(0, |b| b.of(tag));
            let la = field_at(w, 16).map_or(0, |b| b.len);
            let b = field_at(w, 32).map_or(0, |b| b.of(tag));
            k + u64::from(a) + (u64::from(b) << la)
        } else if w & W_OVERTAKE != 0 {
            // The sending thread's VCI; a receive looks on every VCI.
            return match recv {
                false => ep.thread_vci(ctx),
                true => vci::endpoint::on_every_vci(ctx),
            };
        } else {
            let s = if w & W_NO_ANY_SOURCE != 0 {
                src.max(0) as u64
            } else {
                0
            };
            let t = if w & W_NO_ANY_TAG != 0 {
                tag.max(0) as u64
            } else {
                0
            };
            if w & (W_NO_ANY_SOURCE | W_NO_ANY_TAG) == 0 {
                // Only hints the mapping does not use.
                return ctx;
            }
            k + s + t
        };
        on_vci(ctx, (v % n) as usize)
    }
}

#[cold]
fn broken(hint: &str, wildcard: &str) -> Error {
    Error::Arg {
        reason: format!(
            "a receive or probe with {wildcard} on a communicator whose hint {hint} rules it out"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let mut i = Info::new();
        i.set(NO_ANY_TAG, " TRUE ").unwrap();
        i.set(TAG_BITS_SEND, "4:3").unwrap();
        i.set("other", "x").unwrap();
        let h = CommHints::from_info(&i).unwrap();
        assert!(h.no_any_tag && !h.no_any_source);
        assert_eq!(h.tag_bits_send, Some(TagBits { lo: 4, len: 3 }));
        h.write_into(&mut i);
        assert_eq!(i.get(NO_ANY_TAG), Some("true"));
        assert_eq!(i.get("other"), Some("x"));
        for bad in ["3", "0:0", "28:3", "0:9", "a:b", "1:"] {
            let mut j = Info::new();
            j.set(TAG_BITS_RECV, bad).unwrap();
            assert!(matches!(
                CommHints::from_info(&j),
                Err(Error::InfoValue { .. })
            ));
        }
        assert_eq!(TagBits { lo: 2, len: 2 }.of(0b1101), 0b11);
    }

    #[test]
    fn words_agree_and_wildcards_are_checked() {
        let m = VciMap::default();
        // No hints: the context itself, wildcards allowed.
        assert_eq!(m.send_word(6, 3, 0, 1, 5), 6);
        assert_eq!(m.recv_word(6, 3, 1, ANY_SOURCE, ANY_TAG).unwrap(), 6);
        m.set(&CommHints {
            no_any_source: true,
            ..CommHints::default()
        });
        assert!(m.recv_word(6, 3, 1, ANY_SOURCE, 5).is_err());
        assert!(m.recv_word(6, 3, 1, 0, ANY_TAG).is_ok());
        m.set(&CommHints {
            tag_bits_send: Some(TagBits { lo: 0, len: 1 }),
            ..CommHints::default()
        });
        assert!(m.recv_word(6, 3, 1, ANY_SOURCE, ANY_TAG).is_err());
        assert_eq!(
            m.send_word(6, 3, 0, 1, 1),
            m.recv_word(6, 3, 1, ANY_SOURCE, 1).unwrap()
        );
        // Overtaking allows both wildcards; without an endpoint of several
        // VCIs (a unit test has none) both sides keep the plain context.
        m.set(&CommHints {
            allow_overtaking: true,
            ..CommHints::default()
        });
        assert_eq!(m.recv_word(6, 3, 1, ANY_SOURCE, ANY_TAG).unwrap(), 6);
        assert_eq!(m.send_word(6, 3, 0, 1, 5), 6);
        // With a no-wildcard hint as well, its wildcard stays an error.
        m.set(&CommHints {
            allow_overtaking: true,
            no_any_tag: true,
            ..CommHints::default()
        });
        assert!(m.recv_word(6, 3, 1, ANY_SOURCE, ANY_TAG).is_err());
        m.set(&CommHints::default());
        assert!(m.recv_word(6, 3, 1, ANY_SOURCE, ANY_TAG).is_ok());
    }
}
