//! `#[derive(Equivalence)]` as a user of the facade writes it: the
//! generated code names `::hmpi` only, and the datatype it builds works
//! with the reductions.

use hmpi::datatype::{Buffer, Datatype, UserDatatype};
use hmpi::op::{reduce_local, reduce_local_into, SystemOperation, UserOperation};
use hmpi::Equivalence;

#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Sample {
    value: f64,
    weight: f64,
    hits: [u32; 2],
}

#[test]
fn derived_struct_through_the_facade() {
    let t = Sample::equivalent_datatype();
    assert_eq!((t.size(), t.extent()), (24, 24));
    assert!(t.is_dense() && t.basic_type().is_none());
    let s = Sample {
        value: 1.5,
        weight: 2.0,
        hits: [3, 4],
    };
    let mut packed = [0u8; 48];
    t.pack([s, s][..].as_bytes(), 2, &mut packed).unwrap();
    assert_eq!(&packed[..24], s.as_bytes());

    // A user operation over the struct: the sum of each field.
    let add = UserOperation::typed(true, |x: &[Sample], acc: &mut [Sample]| {
        for (a, x) in acc.iter_mut().zip(x) {
            a.value += x.value;
            a.weight += x.weight;
            a.hits[0] += x.hits[0];
            a.hits[1] += x.hits[1];
        }
    });
    let mut acc = [s];
    reduce_local_into(&[s], &mut acc, &add.into()).unwrap();
    assert_eq!(
        acc[0],
        Sample {
            value: 3.0,
            weight: 4.0,
            hits: [6, 8],
        }
    );
    // A predefined operation does not apply to a struct of several types.
    assert!(reduce_local_into(&[s], &mut acc, &SystemOperation::sum().into()).is_err());
}

#[test]
fn predefined_operation_on_a_column() {
    // The first column of a 3x3 matrix of doubles.
    let d = f64::equivalent_datatype();
    let column: Datatype = UserDatatype::vector(3, 1, 3, &d).unwrap().into();
    let m = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let mut acc = [10.0f64; 9];
    reduce_local(&m, &mut acc, 1, &column, &SystemOperation::max().into()).unwrap();
    assert_eq!(acc, [10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]);
    reduce_local(&m, &mut acc, 1, &column, &SystemOperation::replace().into()).unwrap();
    assert_eq!(acc[..4], [1.0, 10.0, 10.0, 4.0]);
    assert_eq!(acc[6], 7.0);
}
