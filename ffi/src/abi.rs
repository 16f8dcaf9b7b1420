//! The MPI 5.0 standard ABI as Rust sees it: handle types, predefined
//! handle values, constants and the `MPI_Status` layout, mirroring
//! `include/mpi.h` (a unit test checks every value against the header).
//!
//! Handles are pointer-sized values. Predefined handles are small integers
//! (below `0x1000`); handles this library creates are
//! `kind << 24 | (0x1000 + index)`, so they fit an `int` (for the ABI's
//! `MPI_*_toint` / `MPI_*_fromint`) and a handle of one kind is never
//! mistaken for another kind's.
//!
//! In C:
//! ```c
//! MPI_Status st;                        /* 32 bytes, as in the standard ABI */
//! MPI_Comm c = MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD));
//! ```

#![allow(missing_docs)]

use std::os::raw::c_int;

macro_rules! handle_type {
    ($($name:ident),* $(,)?) => {$(
        /// A handle of the C interface (a pointer-sized integer).
        #[repr(transparent)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub usize);
    )*};
}

handle_type!(Comm, Group, Datatype, Request, Errhandler, Message, Op, Info, Win, File, Session);

pub type Aint = isize;
pub type Count = i64;
pub type Offset = i64;

/// `MPI_Status`: 32 bytes, three public fields and five internal ones.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MpiStatus {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    /// `[count low 32 bits, count high 32 bits, cancelled, 0, 0]`.
    pub internal: [c_int; 5],
}

// ------------------------------------------------------ predefined handles

pub const OP_NULL: Op = Op(0x20);
pub const SUM: Op = Op(0x21);
pub const MIN: Op = Op(0x22);
pub const MAX: Op = Op(0x23);
pub const PROD: Op = Op(0x24);
pub const BAND: Op = Op(0x28);
pub const BOR: Op = Op(0x29);
pub const BXOR: Op = Op(0x2a);
pub const LAND: Op = Op(0x30);
pub const LOR: Op = Op(0x31);
pub const LXOR: Op = Op(0x32);
pub const MINLOC: Op = Op(0x38);
pub const MAXLOC: Op = Op(0x39);
pub const REPLACE: Op = Op(0x3c);
pub const NO_OP: Op = Op(0x3d);
/// Every predefined operation but `MPI_OP_NULL`, with its name.
pub const PREDEFINED_OPS: &[(Op, &str)] = &[
    (SUM, "MPI_SUM"),
    (MIN, "MPI_MIN"),
    (MAX, "MPI_MAX"),
    (PROD, "MPI_PROD"),
    (BAND, "MPI_BAND"),
    (BOR, "MPI_BOR"),
    (BXOR, "MPI_BXOR"),
    (LAND, "MPI_LAND"),
    (LOR, "MPI_LOR"),
    (LXOR, "MPI_LXOR"),
    (MINLOC, "MPI_MINLOC"),
    (MAXLOC, "MPI_MAXLOC"),
    (REPLACE, "MPI_REPLACE"),
    (NO_OP, "MPI_NO_OP"),
];
pub const COMM_NULL: Comm = Comm(0x100);
pub const COMM_WORLD: Comm = Comm(0x101);
pub const COMM_SELF: Comm = Comm(0x102);
pub const GROUP_NULL: Group = Group(0x108);
pub const GROUP_EMPTY: Group = Group(0x109);
pub const WIN_NULL: Win = Win(0x110);
pub const FILE_NULL: File = File(0x118);
pub const SESSION_NULL: Session = Session(0x120);
pub const MESSAGE_NULL: Message = Message(0x128);
pub const MESSAGE_NO_PROC: Message = Message(0x129);
pub const INFO_NULL: Info = Info(0x130);
pub const INFO_ENV: Info = Info(0x131);
pub const ERRHANDLER_NULL: Errhandler = Errhandler(0x140);
pub const ERRORS_ARE_FATAL: Errhandler = Errhandler(0x141);
pub const ERRORS_ABORT: Errhandler = Errhandler(0x142);
pub const ERRORS_RETURN: Errhandler = Errhandler(0x143);
pub const REQUEST_NULL: Request = Request(0x180);
pub const DATATYPE_NULL: Datatype = Datatype(0x200);

/// Every predefined datatype: handle value, name, size, alignment, and
/// its data blocks `(offset, length)` when they are not one block from 0.
pub const PREDEFINED_TYPES: &[(usize, &str, usize, usize)] = &[
    (0x201, "MPI_AINT", 8, 8),
    (0x202, "MPI_COUNT", 8, 8),
    (0x203, "MPI_OFFSET", 8, 8),
    (0x207, "MPI_PACKED", 1, 1),
    (0x208, "MPI_SHORT", 2, 2),
    (0x209, "MPI_INT", 4, 4),
    (0x20a, "MPI_LONG", 8, 8),
    (0x20b, "MPI_LONG_LONG", 8, 8),
    (0x20c, "MPI_UNSIGNED_SHORT", 2, 2),
    (0x20d, "MPI_UNSIGNED", 4, 4),
    (0x20e, "MPI_UNSIGNED_LONG", 8, 8),
    (0x20f, "MPI_UNSIGNED_LONG_LONG", 8, 8),
    (0x210, "MPI_FLOAT", 4, 4),
    (0x212, "MPI_C_FLOAT_COMPLEX", 8, 4),
    (0x213, "MPI_CXX_FLOAT_COMPLEX", 8, 4),
    (0x214, "MPI_DOUBLE", 8, 8),
    (0x216, "MPI_C_DOUBLE_COMPLEX", 16, 8),
    (0x217, "MPI_CXX_DOUBLE_COMPLEX", 16, 8),
    (0x218, "MPI_LOGICAL", 4, 4),
    (0x219, "MPI_INTEGER", 4, 4),
    (0x21a, "MPI_REAL", 4, 4),
    (0x21b, "MPI_COMPLEX", 8, 4),
    (0x21c, "MPI_DOUBLE_PRECISION", 8, 8),
    (0x21d, "MPI_DOUBLE_COMPLEX", 16, 8),
    (0x21e, "MPI_CHARACTER", 1, 1),
    (0x220, "MPI_LONG_DOUBLE", 16, 16),
    (0x224, "MPI_C_LONG_DOUBLE_COMPLEX", 32, 16),
    (0x225, "MPI_CXX_LONG_DOUBLE_COMPLEX", 32, 16),
    (0x228, "MPI_FLOAT_INT", 8, 4),
    (0x229, "MPI_DOUBLE_INT", 12, 8),
    (0x22a, "MPI_LONG_INT", 12, 8),
    (0x22b, "MPI_2INT", 8, 4),
    (0x22c, "MPI_SHORT_INT", 6, 4),
    (0x22d, "MPI_LONG_DOUBLE_INT", 20, 16),
    (0x230, "MPI_2REAL", 8, 4),
    (0x231, "MPI_2DOUBLE_PRECISION", 16, 8),
    (0x232, "MPI_2INTEGER", 8, 4),
    (0x238, "MPI_C_BOOL", 1, 1),
    (0x239, "MPI_CXX_BOOL", 1, 1),
    (0x23c, "MPI_WCHAR", 4, 4),
    (0x240, "MPI_INT8_T", 1, 1),
    (0x241, "MPI_UINT8_T", 1, 1),
    (0x243, "MPI_CHAR", 1, 1),
    (0x244, "MPI_SIGNED_CHAR", 1, 1),
    (0x245, "MPI_UNSIGNED_CHAR", 1, 1),
    (0x247, "MPI_BYTE", 1, 1),
    (0x248, "MPI_INT16_T", 2, 2),
    (0x249, "MPI_UINT16_T", 2, 2),
    (0x250, "MPI_INT32_T", 4, 4),
    (0x251, "MPI_UINT32_T", 4, 4),
    (0x258, "MPI_INT64_T", 8, 8),
    (0x259, "MPI_UINT64_T", 8, 8),
    (0x2c0, "MPI_LOGICAL1", 1, 1),
    (0x2c1, "MPI_INTEGER1", 1, 1),
    (0x2c8, "MPI_LOGICAL2", 2, 2),
    (0x2c9, "MPI_INTEGER2", 2, 2),
    (0x2ca, "MPI_REAL2", 2, 2),
    (0x2d0, "MPI_LOGICAL4", 4, 4),
    (0x2d1, "MPI_INTEGER4", 4, 4),
    (0x2d2, "MPI_REAL4", 4, 4),
    (0x2d3, "MPI_COMPLEX4", 4, 2),
    (0x2d8, "MPI_LOGICAL8", 8, 8),
    (0x2d9, "MPI_INTEGER8", 8, 8),
    (0x2da, "MPI_REAL8", 8, 8),
    (0x2db, "MPI_COMPLEX8", 8, 4),
    (0x2e0, "MPI_LOGICAL16", 16, 16),
    (0x2e1, "MPI_INTEGER16", 16, 16),
    (0x2e2, "MPI_REAL16", 16, 16),
    (0x2e3, "MPI_COMPLEX16", 16, 8),
    (0x2eb, "MPI_COMPLEX32", 32, 16),
];

/// A predefined type's data blocks: `(offset, length)`.
pub type Blocks = &'static [(isize, usize)];

/// The pair types whose data is not one block starting at 0 (C structs
/// with padding): handle, blocks, extent.
pub const PAIR_TYPES: &[(usize, Blocks, isize)] = &[
    (0x229, &[(0, 12)], 16),       // struct { double; int; }
    (0x22a, &[(0, 12)], 16),       // struct { long; int; }
    (0x22c, &[(0, 2), (4, 4)], 8), // struct { short; int; }
    (0x22d, &[(0, 20)], 32),       // struct { long double; int; }
];

// ------------------------------------------------------------ constants

pub const SUCCESS: c_int = 0;
pub const ERR_BUFFER: c_int = 1;
pub const ERR_COUNT: c_int = 2;
pub const ERR_TYPE: c_int = 3;
pub const ERR_TAG: c_int = 4;
pub const ERR_COMM: c_int = 5;
pub const ERR_RANK: c_int = 6;
pub const ERR_REQUEST: c_int = 7;
pub const ERR_ROOT: c_int = 8;
pub const ERR_GROUP: c_int = 9;
pub const ERR_OP: c_int = 10;
pub const ERR_TOPOLOGY: c_int = 11;
pub const ERR_DIMS: c_int = 12;
pub const ERR_ARG: c_int = 13;
pub const ERR_UNKNOWN: c_int = 14;
pub const ERR_TRUNCATE: c_int = 15;
pub const ERR_OTHER: c_int = 16;
pub const ERR_INTERN: c_int = 17;
pub const ERR_PENDING: c_int = 18;
pub const ERR_IN_STATUS: c_int = 19;
pub const ERR_INFO_KEY: c_int = 31;
pub const ERR_INFO_NOKEY: c_int = 32;
pub const ERR_INFO_VALUE: c_int = 33;
pub const ERR_INFO: c_int = 34;
pub const ERR_NO_MEM: c_int = 39;
pub const ERR_UNSUPPORTED_OPERATION: c_int = 55;
pub const ERR_KEYVAL: c_int = 36;
pub const ERR_LOCKTYPE: c_int = 37;
pub const ERR_RMA_ATTACH: c_int = 46;
pub const ERR_RMA_RANGE: c_int = 48;
pub const ERR_RMA_SYNC: c_int = 50;
pub const ERR_WIN: c_int = 56;
pub const ERR_RMA_FLAVOR: c_int = 57;
/// A peer process the operation depends on ended without finalizing (the
/// standard ABI has no `MPI_ERR_PROC_FAILED`; this is its class for a
/// failed peer).
pub const ERR_PROC_ABORTED: c_int = 58;
pub const ERR_ERRHANDLER: c_int = 61;
pub const ERR_ABI: c_int = 62;
pub const ERR_LASTCODE: c_int = 0x3fff;
/// What the tool information routines (`MPI_T_*`) return when a feature
/// is not provided (they call no error handler).
pub const T_ERR_NOT_SUPPORTED: c_int = 1004;

/// The name and meaning of each error class, by class number.
pub const ERROR_CLASSES: &[(&str, &str)] = &[
    ("MPI_SUCCESS", "no error"),
    ("MPI_ERR_BUFFER", "invalid buffer pointer"),
    ("MPI_ERR_COUNT", "invalid count argument"),
    ("MPI_ERR_TYPE", "invalid datatype"),
    ("MPI_ERR_TAG", "invalid tag"),
    ("MPI_ERR_COMM", "invalid communicator"),
    ("MPI_ERR_RANK", "invalid rank"),
    ("MPI_ERR_REQUEST", "invalid request"),
    ("MPI_ERR_ROOT", "invalid root"),
    ("MPI_ERR_GROUP", "invalid group"),
    ("MPI_ERR_OP", "invalid operation"),
    ("MPI_ERR_TOPOLOGY", "invalid topology"),
    ("MPI_ERR_DIMS", "invalid dimension argument"),
    ("MPI_ERR_ARG", "invalid argument"),
    ("MPI_ERR_UNKNOWN", "unknown error"),
    ("MPI_ERR_TRUNCATE", "message truncated"),
    ("MPI_ERR_OTHER", "other error"),
    ("MPI_ERR_INTERN", "internal error"),
    ("MPI_ERR_PENDING", "pending request"),
    ("MPI_ERR_IN_STATUS", "error code is in status"),
    ("MPI_ERR_ACCESS", "permission denied"),
    ("MPI_ERR_AMODE", "invalid file access mode"),
    ("MPI_ERR_ASSERT", "invalid assertion"),
    ("MPI_ERR_BAD_FILE", "invalid file name"),
    ("MPI_ERR_BASE", "invalid base address"),
    ("MPI_ERR_CONVERSION", "data conversion failed"),
    ("MPI_ERR_DISP", "invalid displacement"),
    ("MPI_ERR_DUP_DATAREP", "data representation already defined"),
    ("MPI_ERR_FILE_EXISTS", "file exists"),
    ("MPI_ERR_FILE_IN_USE", "file in use"),
    ("MPI_ERR_FILE", "invalid file handle"),
    ("MPI_ERR_INFO_KEY", "invalid info key"),
    ("MPI_ERR_INFO_NOKEY", "info key not defined"),
    ("MPI_ERR_INFO_VALUE", "invalid info value"),
    ("MPI_ERR_INFO", "invalid info object"),
    ("MPI_ERR_IO", "input/output error"),
    ("MPI_ERR_KEYVAL", "invalid attribute key"),
    ("MPI_ERR_LOCKTYPE", "invalid lock type"),
    ("MPI_ERR_NAME", "name not found"),
    ("MPI_ERR_NO_MEM", "out of memory"),
    ("MPI_ERR_NOT_SAME", "arguments differ between processes"),
    ("MPI_ERR_NO_SPACE", "out of space"),
    ("MPI_ERR_NO_SUCH_FILE", "no such file"),
    ("MPI_ERR_PORT", "invalid port name"),
    ("MPI_ERR_QUOTA", "quota exceeded"),
    ("MPI_ERR_READ_ONLY", "read-only file or file system"),
    ("MPI_ERR_RMA_ATTACH", "memory cannot be attached"),
    ("MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window"),
    ("MPI_ERR_RMA_RANGE", "target memory out of the window"),
    ("MPI_ERR_RMA_SHARED", "memory cannot be shared"),
    ("MPI_ERR_RMA_SYNC", "wrong synchronisation of RMA calls"),
    ("MPI_ERR_SERVICE", "invalid service name"),
    ("MPI_ERR_SIZE", "invalid size"),
    ("MPI_ERR_SPAWN", "process spawn failed"),
    (
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "unsupported data representation",
    ),
    ("MPI_ERR_UNSUPPORTED_OPERATION", "unsupported operation"),
    ("MPI_ERR_WIN", "invalid window"),
    ("MPI_ERR_RMA_FLAVOR", "wrong window flavor"),
    ("MPI_ERR_PROC_ABORTED", "a peer process aborted"),
    ("MPI_ERR_VALUE_TOO_LARGE", "value too large for its output"),
    ("MPI_ERR_SESSION", "invalid session"),
    ("MPI_ERR_ERRHANDLER", "invalid error handler"),
    ("MPI_ERR_ABI", "ABI mismatch"),
];

pub const ANY_SOURCE: c_int = -1;
pub const ANY_TAG: c_int = -2;
pub const PROC_NULL: c_int = -3;
pub const ROOT: c_int = -4;
pub const UNDEFINED: c_int = -32766;

pub const THREAD_SINGLE: c_int = 0;
pub const THREAD_FUNNELED: c_int = 1024;
pub const THREAD_SERIALIZED: c_int = 2048;
pub const THREAD_MULTIPLE: c_int = 4096;

pub const IDENT: c_int = 201;
pub const CONGRUENT: c_int = 202;
pub const SIMILAR: c_int = 203;
pub const UNEQUAL: c_int = 204;

pub const COMM_TYPE_SHARED: c_int = 221;
pub const COMM_TYPE_HW_UNGUIDED: c_int = 222;
pub const COMM_TYPE_HW_GUIDED: c_int = 223;
pub const COMM_TYPE_RESOURCE_GUIDED: c_int = 224;

pub const MAX_ERROR_STRING: usize = 512;
pub const MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MAX_OBJECT_NAME: usize = 128;
pub const MAX_PROCESSOR_NAME: usize = 256;

pub const MPI_VERSION: c_int = 5;
pub const MPI_SUBVERSION: c_int = 0;
pub const ABI_VERSION: c_int = 1;
pub const ABI_SUBVERSION: c_int = 0;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// `#define NAME ((Type)0x...)` and `NAME = value` lines of mpi.h.
    fn header_values() -> HashMap<String, i64> {
        let text = include_str!("../include/mpi.h");
        let mut map = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("#define ") {
                let mut it = rest.split_whitespace();
                let (Some(name), Some(val)) = (it.next(), it.next()) else {
                    continue;
                };
                if let Some(hex) = val.rsplit(")0x").next().filter(|_| val.contains(")0x")) {
                    let hex = hex.trim_end_matches(')');
                    map.insert(name.to_owned(), i64::from_str_radix(hex, 16).unwrap());
                } else if let Ok(v) = val.parse::<i64>() {
                    map.insert(name.to_owned(), v);
                }
            } else if let Some((name, val)) = line.split_once('=') {
                let name = name.trim();
                let val = val.trim().trim_end_matches(',');
                if !name.starts_with("MPI_") {
                    continue;
                }
                let v = if let Some(h) = val.strip_prefix("0x") {
                    i64::from_str_radix(h, 16).ok()
                } else {
                    val.parse::<i64>().ok()
                };
                if let Some(v) = v {
                    map.insert(name.to_owned(), v);
                }
            }
        }
        map
    }

    #[test]
    fn status_is_the_standard_abi_layout() {
        assert_eq!(std::mem::size_of::<MpiStatus>(), 32);
        assert_eq!(std::mem::offset_of!(MpiStatus, source), 0);
        assert_eq!(std::mem::offset_of!(MpiStatus, tag), 4);
        assert_eq!(std::mem::offset_of!(MpiStatus, error), 8);
    }

    #[test]
    fn constants_match_the_header() {
        let h = header_values();
        let check = |name: &str, v: i64| {
            assert_eq!(h.get(name).copied(), Some(v), "{name}");
        };
        for &(handle, name, _, _) in PREDEFINED_TYPES {
            check(name, handle as i64);
        }
        for &(op, name) in PREDEFINED_OPS {
            check(name, op.0 as i64);
        }
        check("MPI_ERR_OP", i64::from(ERR_OP));
        for (class, (name, _)) in ERROR_CLASSES.iter().enumerate() {
            check(name, class as i64);
        }
        for (name, v) in [
            ("MPI_COMM_NULL", COMM_NULL.0),
            ("MPI_COMM_WORLD", COMM_WORLD.0),
            ("MPI_COMM_SELF", COMM_SELF.0),
            ("MPI_GROUP_NULL", GROUP_NULL.0),
            ("MPI_GROUP_EMPTY", GROUP_EMPTY.0),
            ("MPI_WIN_NULL", WIN_NULL.0),
            ("MPI_FILE_NULL", FILE_NULL.0),
            ("MPI_SESSION_NULL", SESSION_NULL.0),
            ("MPI_MESSAGE_NULL", MESSAGE_NULL.0),
            ("MPI_MESSAGE_NO_PROC", MESSAGE_NO_PROC.0),
            ("MPI_INFO_NULL", INFO_NULL.0),
            ("MPI_INFO_ENV", INFO_ENV.0),
            ("MPI_ERRHANDLER_NULL", ERRHANDLER_NULL.0),
            ("MPI_ERRORS_ARE_FATAL", ERRORS_ARE_FATAL.0),
            ("MPI_ERRORS_RETURN", ERRORS_RETURN.0),
            ("MPI_ERRORS_ABORT", ERRORS_ABORT.0),
            ("MPI_REQUEST_NULL", REQUEST_NULL.0),
            ("MPI_DATATYPE_NULL", DATATYPE_NULL.0),
            ("MPI_OP_NULL", OP_NULL.0),
        ] {
            check(name, v as i64);
        }
        for (name, v) in [
            ("MPI_ANY_SOURCE", ANY_SOURCE),
            ("MPI_ANY_TAG", ANY_TAG),
            ("MPI_PROC_NULL", PROC_NULL),
            ("MPI_UNDEFINED", UNDEFINED),
            ("MPI_THREAD_SINGLE", THREAD_SINGLE),
            ("MPI_THREAD_FUNNELED", THREAD_FUNNELED),
            ("MPI_THREAD_SERIALIZED", THREAD_SERIALIZED),
            ("MPI_THREAD_MULTIPLE", THREAD_MULTIPLE),
            ("MPI_IDENT", IDENT),
            ("MPI_CONGRUENT", CONGRUENT),
            ("MPI_SIMILAR", SIMILAR),
            ("MPI_UNEQUAL", UNEQUAL),
            ("MPI_COMM_TYPE_SHARED", COMM_TYPE_SHARED),
            ("MPI_COMM_TYPE_HW_UNGUIDED", COMM_TYPE_HW_UNGUIDED),
            ("MPI_COMM_TYPE_HW_GUIDED", COMM_TYPE_HW_GUIDED),
            ("MPI_COMM_TYPE_RESOURCE_GUIDED", COMM_TYPE_RESOURCE_GUIDED),
            ("MPI_ERR_LASTCODE", ERR_LASTCODE),
            ("MPI_T_ERR_NOT_SUPPORTED", T_ERR_NOT_SUPPORTED),
            ("MPI_VERSION", MPI_VERSION),
            ("MPI_SUBVERSION", MPI_SUBVERSION),
            ("MPI_ABI_VERSION", ABI_VERSION),
            ("MPI_ABI_SUBVERSION", ABI_SUBVERSION),
        ] {
            check(name, i64::from(v));
        }
        for (name, v) in [
            ("MPI_MAX_ERROR_STRING", MAX_ERROR_STRING),
            ("MPI_MAX_LIBRARY_VERSION_STRING", MAX_LIBRARY_VERSION_STRING),
            ("MPI_MAX_OBJECT_NAME", MAX_OBJECT_NAME),
            ("MPI_MAX_PROCESSOR_NAME", MAX_PROCESSOR_NAME),
        ] {
            check(name, v as i64);
        }
    }
}
