//! Diagnostics that are safe inside the allocator (no allocation).

/// Writes `msg` to standard error with one `write(2)` call per chunk.
/// Used on allocator paths where formatting into a `String` is fine only
/// if the caller knows it may allocate from the system allocator.
pub fn write_stderr(msg: &str) {
    let mut bytes = msg.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe a live byte slice.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}
