//! Diagnostics that are safe inside the allocator: nothing here allocates.

use std::io::Write;

/// Formats into a stack buffer (truncating past 512 bytes) and writes it to
/// standard error. Safe to call from allocator paths as long as the
/// arguments' `Display` implementations do not allocate (integers and
/// string slices do not).
pub fn write_stderr_fmt(args: std::fmt::Arguments<'_>) {
    let mut buf = [0u8; 512];
    let len = {
        let mut cur = &mut buf[..];
        let _ = cur.write_fmt(args);
        512 - cur.len()
    };
    write_bytes(&buf[..len]);
}

fn write_bytes(mut bytes: &[u8]) {
    // `Stderr::as_fd` takes no lock and allocates nothing.
    let stderr = std::io::stderr();
    while !bytes.is_empty() {
        match nix::unistd::write(std::os::fd::AsFd::as_fd(&stderr), bytes) {
            Ok(n) if n > 0 => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            _ => return,
        }
    }
}
