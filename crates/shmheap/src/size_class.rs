//! Size classes: which block size serves a request, and how spans are cut.
//!
//! Blocks of up to [`MAX_CLASS_SIZE`] come from size classes: multiples of
//! 16 up to 128 bytes, then four classes per doubling (160, 192, 224, 256,
//! 320, …, 1 MiB), so internal waste stays below 25%. Each class is carved
//! from spans of whole pages; small classes use one 64 KiB page per span,
//! middle classes spans that hold eight blocks, classes above 128 KiB one
//! block per span. Larger requests get their own span ("huge").
//!
//! ```
//! use shmheap::size_class::{class_of, class_size};
//! assert_eq!(class_size(class_of(1)), 16);
//! assert_eq!(class_size(class_of(129)), 160);
//! assert_eq!(class_size(class_of(1 << 20)), 1 << 20);
//! ```

/// log2 of the page size.
pub const PAGE_SHIFT: u32 = 16;
/// Page size: the unit of spans (64 KiB).
pub const PAGE: usize = 1 << PAGE_SHIFT;
/// Largest size served by a size class.
pub const MAX_CLASS_SIZE: usize = 1 << 20;
/// Number of size classes.
pub const NCLASSES: usize = 8 + 4 * 13;
/// Classes above this size have one block per span.
const SINGLE_BLOCK_ABOVE: usize = 128 << 10;

/// The class serving `size` bytes (`size` ≤ [`MAX_CLASS_SIZE`]; 0 counts as 1).
#[inline]
pub const fn class_of(size: usize) -> usize {
    if size <= 128 {
        if size == 0 {
            0
        } else {
            size.div_ceil(16) - 1
        }
    } else {
        // 2^k < size <= 2^(k+1), four classes between them.
        let k = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
        let step_shift = k - 2;
        let j = (size - (1 << k) + (1 << step_shift) - 1) >> step_shift; // 1..=4
        8 + (k - 7) * 4 + (j - 1)
    }
}

/// The block size of class `class`.
#[inline]
pub const fn class_size(class: usize) -> usize {
    TABLES.size[class]
}

const fn compute_class_size(class: usize) -> usize {
    if class < 8 {
        16 * (class + 1)
    } else {
        let k = 7 + (class - 8) / 4;
        let j = (class - 8) % 4 + 1;
        (1 << k) + (j << (k - 2))
    }
}

/// Pages in one span of class `class`.
pub const fn span_pages(class: usize) -> usize {
    span_pages_of(class_size(class))
}

const fn span_pages_of(s: usize) -> usize {
    let bytes = if s > SINGLE_BLOCK_ABOVE {
        s
    } else if 8 * s > PAGE {
        8 * s
    } else {
        PAGE
    };
    bytes.div_ceil(PAGE)
}

/// Blocks in one span of class `class`.
pub const fn span_blocks(class: usize) -> usize {
    span_pages(class) * PAGE / class_size(class)
}

/// How many blocks of class `class` one thread may keep cached: a budget of
/// 16 MiB per class, between 8 and 512 blocks (64 blocks of 256 KiB, 16 of
/// 1 MiB: a message-sized working set stays in the thread). A thread only fills its cache
/// with blocks it freed itself, so the budget costs memory only in threads
/// that free many blocks of one size without reusing them.
#[inline]
pub const fn cache_capacity(class: usize) -> usize {
    TABLES.cache_capacity[class]
}

/// How many blocks a thread takes from its arena at once when its cache of
/// class `class` is empty: about 64 KiB, between 1 and half the capacity.
#[inline]
pub const fn refill_count(class: usize) -> usize {
    TABLES.refill[class]
}

/// How many empty spans class `class` keeps before returning spans to the
/// pool: about 16 MiB of them (as much as one thread's cache of the class),
/// at least one.
#[inline]
pub const fn keep_empty_spans(class: usize) -> usize {
    TABLES.keep_empty[class]
}

struct Tables {
    size: [usize; NCLASSES],
    cache_capacity: [usize; NCLASSES],
    refill: [usize; NCLASSES],
    keep_empty: [usize; NCLASSES],
}

const fn clamp(x: usize, lo: usize, hi: usize) -> usize {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}

const TABLES: Tables = {
    let mut t = Tables {
        size: [0; NCLASSES],
        cache_capacity: [0; NCLASSES],
        refill: [0; NCLASSES],
        keep_empty: [0; NCLASSES],
    };
    let mut c = 0;
    while c < NCLASSES {
        let size = compute_class_size(c);
        t.size[c] = size;
        t.cache_capacity[c] = clamp((16 << 20) / size, 8, 512);
        t.refill[c] = clamp((64 << 10) / size, 1, t.cache_capacity[c] / 2);
        t.keep_empty[c] = clamp((16 << 20) / (span_pages_of(size) * PAGE), 1, 128);
        c += 1;
    }
    t
};

/// The class for a request of `size` bytes aligned to `align` (a power of
/// two), or `None` if it needs a huge span.
#[inline]
pub const fn class_for(size: usize, align: usize) -> Option<usize> {
    if align <= 16 {
        if size <= MAX_CLASS_SIZE {
            Some(class_of(size))
        } else {
            None
        }
    } else if align <= PAGE {
        // Power-of-two classes start every block at a multiple of their
        // size (spans are page-aligned), so they honour any alignment up
        // to their size and to the page.
        let s = if size > align { size } else { align };
        if s <= MAX_CLASS_SIZE {
            Some(class_of(s.next_power_of_two()))
        } else {
            None
        }
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_sizes_tightly() {
        let mut prev = 0;
        for c in 0..NCLASSES {
            let s = class_size(c);
            assert!(s > prev, "class sizes increase");
            assert_eq!(s % 16, 0, "class {c} size {s} keeps 16-byte alignment");
            assert_eq!(class_of(s), c);
            assert_eq!(class_of(prev + 1), c);
            if prev > 128 {
                assert!((s - prev) * 4 <= prev, "waste below 25% for class {c}");
            }
            prev = s;
        }
        assert_eq!(prev, MAX_CLASS_SIZE);
    }

    #[test]
    fn spans_hold_blocks_with_little_waste() {
        for c in 0..NCLASSES {
            let bytes = span_pages(c) * PAGE;
            let used = span_blocks(c) * class_size(c);
            assert!(span_blocks(c) >= 1);
            assert!(bytes - used < PAGE.max(class_size(c)), "class {c}");
        }
    }

    #[test]
    fn aligned_classes_are_aligned() {
        for align in [32, 64, 4096, PAGE] {
            for size in [1, 100, 5000, 100_000] {
                let c = class_for(size, align).unwrap();
                let s = class_size(c);
                assert!(s >= size && s % align.min(s) == 0 && (s.is_power_of_two()));
            }
        }
        assert_eq!(class_for(10, PAGE * 2), None);
        assert_eq!(class_for(MAX_CLASS_SIZE + 1, 8), None);
    }
}
