//! `malloc` on the node's shared heap.
//!
//! libhmpi exports `malloc`, `free`, `calloc`, `realloc`, `reallocarray`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc` and
//! `malloc_usable_size`, so a program linked with `-lhmpi` has its whole
//! heap in its rank's arena of the node heap: a buffer it `malloc`s can be
//! read by every rank in place (single copy, synergistic copy).
//!
//! * **Before the attach** every request goes to glibc (`__libc_malloc`
//!   and friends, which never come back here). A constructor in
//!   `.init_array` attaches at load time when the launcher started the
//!   process (`HMPI_SHM_NAME` is set), so the heap is shared before `main`
//!   and before `MPI_Init`; without a launcher the attach happens in
//!   `MPI_Init` (a world of one rank).
//! * **After the attach** every request is served by `shmheap::ShmHeap`,
//!   during and after `MPI_Finalize` too (the segment stays mapped).
//! * **`free` routes by address**: a block inside the segment goes back to
//!   the allocator of the arena that holds it (its owner's remote-free
//!   list when another rank allocated it), anything else to glibc.
//!   `realloc` of a glibc block after the attach moves it into the shared
//!   heap, copying glibc's usable size of the old block.
//! * The Rust code of libhmpi allocates through [`LibHeap`], the same
//!   routing as a `GlobalAlloc`, so nothing inside the library recurses
//!   into the exported `malloc`. When the rank's arena cannot serve it
//!   (the program's `malloc` used it up), the library's own bookkeeping
//!   comes from glibc instead, so the next MPI call does not fail for
//!   want of room the program took: the library's tables need not be
//!   shared, and what must be (message staging, collective blocks) is
//!   allocated from the shared heap explicitly, where exhaustion is
//!   `MPI_ERR_NO_MEM`.
//! * **`fork`**: the child of a rank shares the segment's pages with its
//!   parent but must not allocate from the parent's arena, so after `fork`
//!   the child allocates from glibc and leaves the parent's blocks alone
//!   (`free` of one is ignored, `realloc` copies it out).
//! * `HMPI_MALLOC=system` keeps the C `malloc` family on glibc (the
//!   library's own allocations still use the shared heap once attached).
//!
//! A child process that inherits a rank's environment and links libhmpi
//! (say, a program started with `system()`) does not attach: the
//! constructor records the attaching process's pid in `HMPI_HEAP_PID`, and
//! only that process attaches.
//!
//! In C:
//! ```c
//! double *x = malloc(1 << 20);      // in this rank's arena under hmpirun
//! int shared;
//! HMPI_Is_shared(x, &shared);      // 1
//! MPI_Send(x, 1 << 17, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD); // copied once
//! free(x);
//! ```

use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
}

/// The alignment `malloc` guarantees on x86-64 (`alignof(max_align_t)`).
const MALLOC_ALIGN: usize = 16;

/// Set in the child of a `fork`: allocate from glibc only.
static FORKED: AtomicBool = AtomicBool::new(false);
/// `HMPI_MALLOC=system`: the C `malloc` family stays on glibc.
static C_ON_SYSTEM: AtomicBool = AtomicBool::new(false);
/// glibc's `malloc_usable_size` (found with `dlsym(RTLD_NEXT)`), or 0.
static GLIBC_USABLE: AtomicUsize = AtomicUsize::new(0);

/// The variable that records which process attached to the heap.
const HEAP_PID_VAR: &CStr = c"HMPI_HEAP_PID";

/// Whether the shared heap serves this process's allocations now.
#[inline]
fn heap_on() -> bool {
    // Relaxed: FORKED is written by the only thread of a fresh child
    // before anything else runs there.
    shmheap::is_attached() && !FORKED.load(Ordering::Relaxed)
}

/// Whether the C `malloc` family uses the shared heap now.
#[inline]
fn c_heap_on() -> bool {
    // Relaxed: written once by the constructor, before `main`.
    heap_on() && !C_ON_SYSTEM.load(Ordering::Relaxed)
}

fn set_enomem() {
    // SAFETY: errno is a valid thread-local int.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
}

/// A block of the shared heap, or null (errno ENOMEM).
fn heap_alloc(size: usize, align: usize, zeroed: bool) -> *mut c_void {
    let Ok(layout) = Layout::from_size_align(size.max(1), align.max(MALLOC_ALIGN)) else {
        set_enomem();
        return ptr::null_mut();
    };
    // SAFETY: a valid layout of non-zero size.
    let p = unsafe {
        if zeroed {
            ShmHeap.alloc_zeroed(layout)
        } else {
            ShmHeap.alloc(layout)
        }
    };
    if p.is_null() {
        set_enomem();
    }
    p.cast()
}

/// Frees a block of the shared heap (of any rank).
///
/// # Safety
/// `p` is a live block of the node heap.
unsafe fn heap_free(p: *mut c_void) {
    if FORKED.load(Ordering::Relaxed) {
        return; // the parent's memory: not ours to free
    }
    // SAFETY: the caller's guarantee; ShmHeap routes shared blocks by
    // address and ignores the layout for them.
    unsafe { ShmHeap.dealloc(p.cast(), Layout::from_size_align_unchecked(1, 1)) }
}

/// glibc's usable size of one of its blocks.
///
/// # Safety
/// `p` is a live glibc block.
unsafe fn glibc_usable_size(p: *mut c_void) -> usize {
    let mut f = GLIBC_USABLE.load(Ordering::Relaxed);
    if f == 0 {
        f = find_glibc_usable_size();
    }
    if f == 0 {
        return 0;
    }
    // SAFETY: `f` is glibc's `malloc_usable_size`, found by dlsym.
    let func: unsafe extern "C" fn(*mut c_void) -> usize = unsafe { std::mem::transmute(f) };
    // SAFETY: the caller's guarantee.
    unsafe { func(p) }
}

fn find_glibc_usable_size() -> usize {
    // SAFETY: dlsym with a valid C string; RTLD_NEXT finds the definition
    // after this object (glibc's). dlsym may allocate: our malloc serves it.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) } as usize;
    // Relaxed: a plain cache; every thread finds the same address.
    GLIBC_USABLE.store(f, Ordering::Relaxed);
    f
}

/// A block of the shared heap when attached (whatever `HMPI_MALLOC` says),
/// of glibc before: `MPI_Alloc_mem`'s memory.
pub(crate) fn alloc_mem(size: usize) -> *mut c_void {
    if heap_on() {
        heap_alloc(size, 64, false)
    } else {
        // SAFETY: forwarding to glibc.
        unsafe { __libc_memalign(64, size.max(1)) }
    }
}

// ------------------------------------------------------------ the exports

/// `malloc`: the shared heap once attached, glibc before.
///
/// # Safety
/// As C's `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    if c_heap_on() {
        heap_alloc(size, MALLOC_ALIGN, false)
    } else {
        // SAFETY: forwarding to glibc.
        unsafe { __libc_malloc(size) }
    }
}

/// `free`, routed by address.
///
/// # Safety
/// As C's `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if shmheap::is_shared(p) {
        // SAFETY: a live block of the node heap (the caller's guarantee).
        unsafe { heap_free(p) }
    } else {
        // SAFETY: memory outside the segment came from glibc.
        unsafe { __libc_free(p) }
    }
}

/// `calloc`: zeroed; an overflowing `n * size` is ENOMEM.
///
/// # Safety
/// As C's `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        set_enomem();
        return ptr::null_mut();
    };
    if c_heap_on() {
        heap_alloc(total, MALLOC_ALIGN, true)
    } else {
        // SAFETY: forwarding to glibc.
        unsafe { __libc_calloc(n, size) }
    }
}

/// `realloc`. A shared block stays in the heap; a glibc block moves into
/// the shared heap once attached; `realloc(p, 0)` frees and returns null
/// (as glibc does).
///
/// # Safety
/// As C's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as malloc.
        return unsafe { malloc(size) };
    }
    if size == 0 {
        // SAFETY: as free.
        unsafe { free(p) };
        return ptr::null_mut();
    }
    if shmheap::is_shared(p) {
        let Some(old) = shmheap::usable_size(p) else {
            set_enomem();
            return ptr::null_mut();
        };
        if FORKED.load(Ordering::Relaxed) {
            // SAFETY: forwarding to glibc.
            let new = unsafe { __libc_malloc(size) };
            if !new.is_null() {
                // SAFETY: `old` bytes are readable at `p`, `size` writable
                // at `new`; the blocks are distinct.
                unsafe { ptr::copy_nonoverlapping(p.cast::<u8>(), new.cast(), old.min(size)) };
            }
            return new;
        }
        let Ok(layout) = Layout::from_size_align(old, MALLOC_ALIGN) else {
            set_enomem();
            return ptr::null_mut();
        };
        // SAFETY: `p` is a live heap block of at least `old` bytes (its
        // usable size), so copying `old` bytes from it is valid; `size` is
        // non-zero.
        let new = unsafe { ShmHeap.realloc(p.cast(), layout, size) };
        if new.is_null() {
            set_enomem();
        }
        return new.cast();
    }
    if c_heap_on() {
        // A glibc block from before the attach: move it into the heap.
        let new = heap_alloc(size, MALLOC_ALIGN, false);
        if !new.is_null() {
            // SAFETY: `p` is a live glibc block (the caller's guarantee).
            let old = unsafe { glibc_usable_size(p) };
            // SAFETY: `old` bytes readable at `p`, `size` writable at `new`.
            unsafe {
                ptr::copy_nonoverlapping(p.cast::<u8>(), new.cast(), old.min(size));
                __libc_free(p);
            }
        }
        return new;
    }
    // SAFETY: forwarding a glibc block to glibc.
    unsafe { __libc_realloc(p, size) }
}

/// `reallocarray`: `realloc` with an overflow check.
///
/// # Safety
/// As C's `reallocarray`.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: as realloc.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            set_enomem();
            ptr::null_mut()
        }
    }
}

/// An aligned block: the shared heap once attached, glibc before.
fn aligned(align: usize, size: usize) -> *mut c_void {
    if c_heap_on() {
        heap_alloc(size, align, false)
    } else {
        // SAFETY: `align` is a power of two (checked by every caller).
        unsafe { __libc_memalign(align, size) }
    }
}

/// `posix_memalign`: `align` must be a power of two and a multiple of
/// `sizeof(void *)` (else EINVAL).
///
/// # Safety
/// As C's `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if out.is_null() || !align.is_power_of_two() || align % std::mem::size_of::<usize>() != 0 {
        return libc::EINVAL;
    }
    let p = aligned(align, size);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: `out` is a valid pointer (the caller's guarantee, checked
    // non-null above).
    unsafe { *out = p };
    0
}

/// `aligned_alloc`: `align` must be a power of two (else EINVAL).
///
/// # Safety
/// As C's `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        // SAFETY: errno is a valid thread-local int.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `memalign`: an `align` that is not a power of two is rounded up to one
/// (as glibc does).
///
/// # Safety
/// As C's `memalign`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match align.max(1).checked_next_power_of_two() {
        Some(a) => aligned(a, size),
        None => {
            // SAFETY: errno is a valid thread-local int.
            unsafe { *libc::__errno_location() = libc::EINVAL };
            ptr::null_mut()
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// `valloc`: page-aligned.
///
/// # Safety
/// As C's `valloc`.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    aligned(page_size(), size)
}

/// `pvalloc`: page-aligned, size rounded up to whole pages.
///
/// # Safety
/// As C's `pvalloc`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let page = page_size();
    match size.max(1).checked_next_multiple_of(page) {
        Some(s) => aligned(page, s),
        None => {
            set_enomem();
            ptr::null_mut()
        }
    }
}

/// `malloc_usable_size`: the shared heap's or glibc's answer, by address.
///
/// # Safety
/// As C's `malloc_usable_size`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        0
    } else if shmheap::is_shared(p) {
        shmheap::usable_size(p).unwrap_or(0)
    } else {
        // SAFETY: a glibc block (the caller's guarantee).
        unsafe { glibc_usable_size(p) }
    }
}

// ------------------------------------------------- the library's allocator

/// The allocator of libhmpi's own Rust code: the shared heap once
/// attached, glibc's internal entry points before (never the exported
/// `malloc`), frees routed by address.
#[derive(Debug, Clone, Copy)]
pub struct LibHeap;

/// glibc memory for `layout`.
///
/// # Safety
/// `layout` has a non-zero size.
unsafe fn libc_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    // SAFETY: forwarding to glibc; memalign accepts any power-of-two
    // alignment.
    let p = unsafe {
        match (layout.align() <= MALLOC_ALIGN, zeroed) {
            (true, false) => __libc_malloc(layout.size()),
            (true, true) => __libc_calloc(1, layout.size()),
            (false, _) => __libc_memalign(layout.align(), layout.size()),
        }
    };
    if zeroed && layout.align() > MALLOC_ALIGN && !p.is_null() {
        // SAFETY: a fresh block of `layout.size()` bytes.
        unsafe { ptr::write_bytes(p.cast::<u8>(), 0, layout.size()) };
    }
    p.cast()
}

// SAFETY: each block comes from the shared heap or glibc with the layout's
// size and alignment, and goes back to the allocator that owns its address
// (the segment's range is fixed once attached, and glibc never hands out
// addresses inside it); realloc copies min(old, new) bytes.
unsafe impl GlobalAlloc for LibHeap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if heap_on() {
            // Quietly: a full arena is not the library's failure.
            if let Ok(p) = ShmHeap.try_alloc(layout) {
                return p.as_ptr();
            }
        }
        // Before the attach, or the arena is full: glibc (`dealloc` routes
        // by address).
        // SAFETY: as above.
        unsafe { libc_alloc(layout, false) }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if shmheap::is_shared(p) {
            if !FORKED.load(Ordering::Relaxed) {
                // SAFETY: a live heap block allocated with `layout`.
                unsafe { ShmHeap.dealloc(p, layout) }
            }
        } else {
            // SAFETY: memory outside the segment came from glibc.
            unsafe { __libc_free(p.cast()) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if heap_on() {
            if let Ok(p) = ShmHeap.try_alloc_zeroed(layout) {
                return p.as_ptr();
            }
        }
        // As in `alloc`.
        // SAFETY: as above.
        unsafe { libc_alloc(layout, true) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if shmheap::is_shared(p) && !FORKED.load(Ordering::Relaxed) {
            // SAFETY: a live heap block of `layout`; the caller's contract.
            let q = unsafe { ShmHeap.realloc(p, layout, new_size) };
            if !q.is_null() {
                return q;
            }
            // The arena is full: move the block out (below).
        }
        if !shmheap::is_shared(p) && !heap_on() && layout.align() <= MALLOC_ALIGN {
            // SAFETY: a glibc block, staying in glibc.
            return unsafe { __libc_realloc(p.cast(), new_size) }.cast();
        }
        // Across the boundary (glibc block, heap now on), or after fork.
        // SAFETY: `new_size` with `layout.align()` is valid (the caller's
        // contract for realloc).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: non-zero size (GlobalAlloc::realloc's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks live and distinct; the smaller size.
            unsafe {
                ptr::copy_nonoverlapping(p, new, layout.size().min(new_size));
                self.dealloc(p, layout);
            }
        }
        new
    }
}

// ------------------------------------------------------------ constructor

extern "C" fn after_fork_in_child() {
    // Relaxed: the child has one thread until it starts others (which
    // synchronise with this one through pthread_create).
    FORKED.store(true, Ordering::Relaxed);
}

/// Whether this process is the one that may attach to the node heap named
/// in its environment (not a child that inherited a rank's environment).
pub(crate) fn may_attach() -> Result<(), String> {
    // SAFETY: getenv with a valid C string; read before any thread of ours
    // changes the environment (only the constructor sets this variable).
    let v = unsafe { libc::getenv(HEAP_PID_VAR.as_ptr()) };
    if v.is_null() {
        return Ok(());
    }
    // SAFETY: getenv returned a valid C string.
    let v = unsafe { CStr::from_ptr(v) }.to_string_lossy();
    if v.trim().parse::<u32>().ok() == Some(std::process::id()) {
        Ok(())
    } else {
        Err(format!(
            "this process inherited the node heap of process {v} (HMPI_HEAP_PID); \
             only that process may attach to it"
        ))
    }
}

fn record_attach() {
    let pid = format!("{}\0", std::process::id());
    // SAFETY: valid C strings; called from the constructor, before any
    // other thread exists.
    unsafe { libc::setenv(HEAP_PID_VAR.as_ptr(), pid.as_ptr().cast::<c_char>(), 1) };
}

/// Runs when libhmpi is loaded (before `main`): fork handler, glibc's
/// `malloc_usable_size`, `HMPI_MALLOC`, and the attach to the node heap
/// when the launcher started this process.
extern "C" fn on_load() {
    // SAFETY: registering a handler that only stores an atomic.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    find_glibc_usable_size();
    if std::env::var_os("HMPI_MALLOC").is_some_and(|v| v == "system") {
        // Relaxed: before main; nothing else runs yet.
        C_ON_SYSTEM.store(true, Ordering::Relaxed);
    }
    if std::env::var_os(shmheap::env::SHM_NAME).is_some()
        && may_attach().is_ok()
        && !shmheap::is_attached()
        && shmheap::attach_from_env().is_ok()
    {
        record_attach();
    }
    // A failed attach is reported by MPI_Init, which tries again.
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
