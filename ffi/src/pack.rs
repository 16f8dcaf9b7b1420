//! The large-count forms of packing (`MPI_Pack_c`, `MPI_Unpack_c`,
//! `MPI_Pack_size_c`): their counts, sizes and positions are `MPI_Count`;
//! they run `MPI_Pack`, `MPI_Unpack` and `MPI_Pack_size` (see
//! [`crate::datatype`]) when the values fit an `int`, and report
//! `MPI_ERR_COUNT` when they do not (buffers of 2 GiB and more are not
//! packed here).
//!
//! In C:
//! ```c
//! MPI_Count pos = 0, size;
//! MPI_Pack_size_c(3, MPI_INT, MPI_COMM_WORLD, &size);
//! MPI_Pack_c(ints, 3, MPI_INT, packed, size, &pos, MPI_COMM_WORLD);
//! ```

use crate::abi::{self, Comm, Count, Datatype};
use crate::errors::{api, out, MpiError, Res};
use std::ffi::{c_int, c_void};

/// A large count, size or position as an `int`.
fn small(v: Count, what: &str) -> Res<c_int> {
    c_int::try_from(v).map_err(|_| {
        MpiError::new(
            abi::ERR_COUNT,
            format!("{what} {v} does not fit the packing routines' int range"),
        )
    })
}

/// A buffer size: one larger than an `int` is as large as an `int` can
/// say (the data packed into it must fit an `int` range anyway).
fn size_arg(v: Count) -> c_int {
    c_int::try_from(v).unwrap_or(if v < 0 { -1 } else { c_int::MAX })
}

/// Runs `f` (an int form's code) and reports a conversion error through
/// `comm`'s error handler as the int form would.
fn run(func: &'static str, comm: Comm, f: impl FnOnce() -> Res<c_int>) -> c_int {
    let mut code = abi::SUCCESS;
    let rc = crate::errors::api_comm(func, comm, |_| {
        code = f()?;
        Ok(())
    });
    if rc != abi::SUCCESS {
        rc
    } else {
        code
    }
}

mpi_fn! {
    /// [`MPI_Pack`](crate::datatype::MPI_Pack) with large counts.
    fn MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, incount: Count, datatype: Datatype, outbuf: *mut c_void, outsize: Count, position: *mut Count, comm: Comm) -> c_int {
        run("MPI_Pack_c", comm, || {
            let p = out(position, "position")?;
            let n = small(incount, "count")?;
            // SAFETY: checked non-null.
            let mut at = small(unsafe { p.read() }, "position")?;
            // SAFETY: MPI's contract for the buffers; `at` is ours.
            let rc = unsafe { crate::datatype::PMPI_Pack(inbuf, n, datatype, outbuf, size_arg(outsize), &mut at, comm) };
            if rc == abi::SUCCESS {
                // SAFETY: checked non-null.
                unsafe { p.write(Count::from(at)) };
            }
            Ok(rc)
        })
    }

    /// [`MPI_Unpack`](crate::datatype::MPI_Unpack) with large counts.
    fn MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: Count, position: *mut Count, outbuf: *mut c_void, outcount: Count, datatype: Datatype, comm: Comm) -> c_int {
        run("MPI_Unpack_c", comm, || {
            let p = out(position, "position")?;
            let n = small(outcount, "count")?;
            // SAFETY: checked non-null.
            let mut at = small(unsafe { p.read() }, "position")?;
            // SAFETY: MPI's contract for the buffers; `at` is ours.
            let rc = unsafe { crate::datatype::PMPI_Unpack(inbuf, size_arg(insize), &mut at, outbuf, n, datatype, comm) };
            if rc == abi::SUCCESS {
                // SAFETY: checked non-null.
                unsafe { p.write(Count::from(at)) };
            }
            Ok(rc)
        })
    }

    /// [`MPI_Pack_size`](crate::datatype::MPI_Pack_size) with a large count.
    fn MPI_Pack_size_c / PMPI_Pack_size_c(incount: Count, datatype: Datatype, comm: Comm, size: *mut Count) -> c_int {
        api("MPI_Pack_size_c", || {
            let p = out(size, "size")?;
            let comm_ok = crate::comm::comm_ref(comm)?;
            let n = usize::try_from(incount)
                .map_err(|_| MpiError::new(abi::ERR_COUNT, format!("negative count {incount}")).on(&comm_ok))?;
            let b = crate::datatype::type_any(datatype)
                .and_then(|t| t.bytes(n))
                .map_err(|e| e.on(&comm_ok))?;
            // SAFETY: checked non-null.
            unsafe { p.write(b as Count) };
            Ok(())
        })
    }
}
