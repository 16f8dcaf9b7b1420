//! Reduction operations of the C interface: the predefined `MPI_Op`
//! handles, user operations (`MPI_Op_create`, `MPI_Op_free`,
//! `MPI_Op_commutative`) and `MPI_Reduce_local`. The operations themselves
//! are `hmpi_core::op`; this module keeps the handle table and converts C
//! arguments. A user function is called with the buffers where they are
//! (in the datatype's layout), the count and the datatype's handle, as MPI
//! specifies; counts above `INT_MAX` reach an `MPI_User_function` in
//! several calls.
//!
//! In C:
//! ```c
//! int in[2] = {1, 7}, acc[2] = {5, 2};
//! MPI_Reduce_local(in, acc, 2, MPI_INT, MPI_MAX);   // acc == {5, 7}
//! ```

use crate::abi::{self, Count, Datatype, Op};
use crate::datatype::{count_arg, type_ref};
use crate::errors::{api_active, err, out, MpiError, Res};
use crate::handles::{Table, KIND_OP};
use hmpi_core::datatype::Datatype as CoreType;
use hmpi_core::op::{reduce_local_raw, Operation, SystemOperation, UserOperation};
use std::ffi::{c_int, c_void};

/// `MPI_User_function`.
pub type UserFunction = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut Datatype);
/// `MPI_User_function_c`.
pub type UserFunctionC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut Count, *mut Datatype);

/// User operations by handle.
static OPS: Table<Operation> = Table::new(KIND_OP);

/// The predefined operation of a handle, if it is one.
fn system_op(op: Op) -> Option<SystemOperation> {
    let s = match op {
        abi::SUM => SystemOperation::sum(),
        abi::MIN => SystemOperation::min(),
        abi::MAX => SystemOperation::max(),
        abi::PROD => SystemOperation::product(),
        abi::BAND => SystemOperation::bitwise_and(),
        abi::BOR => SystemOperation::bitwise_or(),
        abi::BXOR => SystemOperation::bitwise_xor(),
        abi::LAND => SystemOperation::logical_and(),
        abi::LOR => SystemOperation::logical_or(),
        abi::LXOR => SystemOperation::logical_xor(),
        abi::MINLOC => SystemOperation::min_loc(),
        abi::MAXLOC => SystemOperation::max_loc(),
        abi::REPLACE => SystemOperation::replace(),
        abi::NO_OP => SystemOperation::no_op(),
        _ => return None,
    };
    Some(s)
}

/// The operation of a handle.
pub fn op_ref(op: Op) -> Res<Operation> {
    if let Some(s) = system_op(op) {
        return Ok(s.into());
    }
    if op == abi::OP_NULL {
        return err(abi::ERR_OP, "MPI_OP_NULL is not an operation");
    }
    OPS.get(op.0).map_err(|_| {
        MpiError::new(
            abi::ERR_OP,
            format!(
                "{:#x} is not an operation (freed, or another kind of handle)",
                op.0
            ),
        )
    })
}

/// Stores a user operation calling `call(input, inout, count, extent,
/// datatype handle)` and writes its handle.
///
/// # Safety
/// `call` is safe to call with the elements of a `MPI_Reduce_local`
/// (the user function's contract); `op` is valid for a write when not
/// null.
unsafe fn create(
    commute: c_int,
    op: *mut Op,
    call: impl Fn(*mut c_void, *mut c_void, usize, isize, &mut Datatype) + Send + Sync + 'static,
) -> Res {
    let p = out(op, "op")?;
    let f = move |a: *const u8, o: *mut u8, n: usize, t: &CoreType| {
        let mut h = Datatype(t.handle().unwrap_or(abi::DATATYPE_NULL.0));
        call(a.cast_mut().cast(), o.cast(), n, t.extent(), &mut h);
    };
    // SAFETY: `call` touches only the elements it is given (the caller's
    // guarantee, which is the user function's contract in MPI).
    let u = unsafe { UserOperation::from_raw(commute != 0, f) };
    let h = OPS
        .insert(u.into())
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many operations"))?;
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(Op(h)) };
    Ok(())
}

/// `MPI_Reduce_local` for any count type.
///
/// # Safety
/// The buffers hold `count` elements of `datatype` (MPI's contract).
unsafe fn reduce_local(
    func: &'static str,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: Res<usize>,
    datatype: Datatype,
    op: Op,
) -> c_int {
    api_active(func, || {
        let n = count?;
        let t = type_ref(datatype)?;
        let op = op_ref(op)?;
        t.check_buffer(inbuf, n)?;
        t.check_buffer(inoutbuf, n)?;
        t.bytes(n)?;
        // SAFETY: MPI's contract: `count` elements at each buffer, which
        // do not overlap.
        unsafe { reduce_local_raw(inbuf.cast(), inoutbuf.cast(), n, &t.ty, &op) }?;
        Ok(())
    })
}

mpi_fn! {
    /// Creates a user operation (`MPI_User_function`).
    fn MPI_Op_create / PMPI_Op_create(user_fn: Option<UserFunction>, commute: c_int, op: *mut Op) -> c_int {
        api_active("MPI_Op_create", || {
            let Some(f) = user_fn else {
                return err(abi::ERR_ARG, "user_fn is a null pointer");
            };
            let call = move |a: *mut c_void, o: *mut c_void, n: usize, ext: isize, h: &mut Datatype| {
                // `len` is an int: more elements go in several calls.
                let mut done = 0;
                while done < n {
                    let k = (n - done).min(c_int::MAX as usize);
                    let mut len = k as c_int;
                    let off = (done as isize).wrapping_mul(ext);
                    // SAFETY: the user function's contract: it reads and
                    // writes `len` elements of the datatype at the pointers.
                    unsafe {
                        f(a.cast::<u8>().wrapping_offset(off).cast(), o.cast::<u8>().wrapping_offset(off).cast(), &mut len, h)
                    };
                    done += k;
                }
            };
            // SAFETY: the user function's contract; the caller's pointer.
            unsafe { create(commute, op, call) }
        })
    }

    /// Creates a user operation (`MPI_User_function_c`, `MPI_Count` lengths).
    fn MPI_Op_create_c / PMPI_Op_create_c(user_fn: Option<UserFunctionC>, commute: c_int, op: *mut Op) -> c_int {
        api_active("MPI_Op_create_c", || {
            let Some(f) = user_fn else {
                return err(abi::ERR_ARG, "user_fn is a null pointer");
            };
            let call = move |a: *mut c_void, o: *mut c_void, n: usize, _: isize, h: &mut Datatype| {
                let mut len = n as Count;
                // SAFETY: the user function's contract.
                unsafe { f(a, o, &mut len, h) };
            };
            // SAFETY: the user function's contract; the caller's pointer.
            unsafe { create(commute, op, call) }
        })
    }

    /// Frees a user operation; `*op` becomes `MPI_OP_NULL`.
    fn MPI_Op_free / PMPI_Op_free(op: *mut Op) -> c_int {
        api_active("MPI_Op_free", || {
            let p = out(op, "op")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if system_op(h).is_some() {
                return err(abi::ERR_OP, "a predefined operation cannot be freed");
            }
            OPS.remove(h.0).map_err(|_| {
                MpiError::new(abi::ERR_OP, format!("{:#x} is not a user operation", h.0))
            })?;
            // SAFETY: as above.
            unsafe { p.write(abi::OP_NULL) };
            Ok(())
        })
    }

    /// Whether an operation is commutative.
    fn MPI_Op_commutative / PMPI_Op_commutative(op: Op, commute: *mut c_int) -> c_int {
        api_active("MPI_Op_commutative", || {
            let o = op_ref(op)?;
            // SAFETY: the caller's int pointer.
            unsafe { crate::errors::put(commute, "commute", c_int::from(o.is_commutative())) }
        })
    }

    /// `inoutbuf[i] = inbuf[i] op inoutbuf[i]` for `count` elements.
    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op) -> c_int {
        // SAFETY: MPI's contract for the buffers.
        unsafe { reduce_local("MPI_Reduce_local", inbuf, inoutbuf, count_arg(count), datatype, op) }
    }

    /// `MPI_Reduce_local` with an `MPI_Count` count.
    fn MPI_Reduce_local_c / PMPI_Reduce_local_c(inbuf: *const c_void, inoutbuf: *mut c_void, count: Count, datatype: Datatype, op: Op) -> c_int {
        let n = usize::try_from(count)
            .map_err(|_| MpiError::new(abi::ERR_COUNT, format!("negative count {count}")));
        // SAFETY: MPI's contract for the buffers.
        unsafe { reduce_local("MPI_Reduce_local_c", inbuf, inoutbuf, n, datatype, op) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_predefined_handle_is_an_operation() {
        for &(h, name) in abi::PREDEFINED_OPS {
            let s = system_op(h).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(s.name(), name);
            assert!(op_ref(h).is_ok());
        }
        assert_eq!(op_ref(abi::OP_NULL).unwrap_err().class, abi::ERR_OP);
        assert_eq!(op_ref(Op(0x27)).unwrap_err().class, abi::ERR_OP);
    }
}
