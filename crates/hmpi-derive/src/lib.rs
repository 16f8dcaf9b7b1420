//! `#[derive(Equivalence)]` for hmpi's `Equivalence` (rsmpi's derive of the
//! same name).
//!
//! The derive implements `Equivalence` for a `#[repr(C)]` struct (named or
//! tuple fields, no generic parameters) whose fields are all `Equivalence`.
//! `Equivalence` promises that a value's bytes are all data and that any
//! bytes make a value, so the generated code refuses to compile, through
//! constant assertions, a struct with padding (its size must be the sum of
//! its fields' sizes). `equivalent_datatype()` builds a struct datatype
//! from each field's offset (`core::mem::offset_of!`) and datatype, with
//! the struct's size as its extent (`#[repr(C, packed)]` included).
//!
//! Paths in the generated code start at `::hmpi` (the facade), so that a
//! crate depending only on `hmpi` can use the derive; another path is
//! given with `#[equivalence(crate = "path")]` (`"hmpi_core"` for a crate
//! that uses `hmpi_core` directly, `"crate"` inside `hmpi_core`).
//!
//! `MpiEquivalence` is the same derive for the rsmpi-compatible crate
//! (`hmpi-mpi`, whose library is `mpi`): paths start at `::mpi::__derive`
//! and, as with rsmpi's derive, `#[repr(C)]` is not required.
//!
//! # Example
//! ```ignore
//! use hmpi::datatype::Equivalence;
//!
//! #[derive(Clone, Copy, Equivalence)]
//! #[repr(C)]
//! struct Particle { pos: [f64; 3], id: u64 }
//! ```

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, Index, LitStr, Member};

/// Derives `Equivalence` (see the crate docs).
#[proc_macro_derive(Equivalence, attributes(equivalence))]
pub fn derive_equivalence(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input, syn::parse_quote!(::hmpi)) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// rsmpi's derive for the rsmpi-compatible crate (`hmpi-mpi`, imported as
/// `mpi`), re-exported as `mpi::traits::Equivalence`, so that a program
/// depending only on it derives as it did with rsmpi: a struct (named,
/// tuple or unit; `#[repr(C)]` or not, padding allowed) whose fields are
/// `Equivalence`, arrays or tuples of such. Its datatype is a struct type
/// of the fields at the offsets the compiler chose (`offset_of!`), made
/// the first time it is asked for and kept (paths under
/// `::mpi::__derive`).
#[proc_macro_derive(MpiEquivalence, attributes(equivalence))]
pub fn derive_mpi_equivalence(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_mpi(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The datatype expression of a field of type `ty` for `MpiEquivalence`:
/// arrays and tuples are described here (as rsmpi's derive does), any
/// other type through its `Equivalence`.
fn mpi_field_datatype(ty: &syn::Type) -> TokenStream2 {
    let d = quote!(::mpi::__derive);
    match ty {
        syn::Type::Array(a) => {
            let elem = mpi_field_datatype(&a.elem);
            let n = &a.len;
            quote!(#d::array(#n, &#elem))
        }
        syn::Type::Tuple(t) => {
            let offsets = (0..t.elems.len()).map(|i| {
                let i = Index::from(i);
                quote!(::core::mem::offset_of!(#t, #i) as isize)
            });
            let types = t.elems.iter().map(mpi_field_datatype);
            quote!(#d::structure(::core::mem::size_of::<#t>(), &[#(#offsets),*], &[#(#types),*]))
        }
        syn::Type::Paren(p) => mpi_field_datatype(&p.elem),
        syn::Type::Group(g) => mpi_field_datatype(&g.elem),
        _ => quote!(#d::of::<#ty>()),
    }
}

/// `MpiEquivalence`: rsmpi's `Equivalence` with `type Out = DatatypeRef`.
fn expand_mpi(input: DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "#[derive(Equivalence)] does not support generic parameters: implement \
             Equivalence by hand",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(Equivalence)] is for structs: an enum's bytes are not all valid values",
        ));
    };
    let (members, types): (Vec<Member>, Vec<&syn::Type>) = match &data.fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|f| (Member::Named(f.ident.clone().expect("named field")), &f.ty))
            .unzip(),
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| (Member::Unnamed(Index::from(i)), &f.ty))
            .unzip(),
        Fields::Unit => (Vec::new(), Vec::new()),
    };
    let fields = types.iter().map(|t| mpi_field_datatype(t));
    let d = quote!(::mpi::__derive);
    Ok(quote! {
        // SAFETY: the datatype lists every field, each described by its
        // own `Equivalence` (or, for arrays and tuples, by their elements'),
        // at the offset the compiler gave it, inside the struct's size:
        // it describes the struct's data, and data of such fields make a
        // valid struct.
        unsafe impl #d::Equivalence for #name {
            type Out = #d::DatatypeRef<'static>;
            fn equivalent_datatype() -> Self::Out {
                #d::derived::<Self>(::core::any::type_name::<Self>(), || {
                    #d::structure(
                        ::core::mem::size_of::<Self>(),
                        &[#(::core::mem::offset_of!(Self, #members) as isize),*],
                        &[#(#fields),*],
                    )
                })
            }
        }
    })
}

/// The crate path of `#[equivalence(crate = "...")]`, `default` without it.
fn crate_path(input: &DeriveInput, default: syn::Path) -> syn::Result<syn::Path> {
    let mut path = default;
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("equivalence"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let s: LitStr = meta.value()?.parse()?;
                path = s.parse()?;
                Ok(())
            } else {
                Err(meta.error("expected `crate = \"path\"`"))
            }
        })?;
    }
    Ok(path)
}

/// Whether the struct is `#[repr(C)]` (or `transparent`, which has the
/// layout of its one field).
fn is_repr_c(input: &DeriveInput) -> syn::Result<bool> {
    let mut c = false;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") || meta.path.is_ident("transparent") {
                c = true;
            }
            if meta.input.peek(syn::token::Paren) {
                // `align(N)` / `packed(N)`: skip the argument.
                let content;
                syn::parenthesized!(content in meta.input);
                let _: TokenStream2 = content.parse()?;
            }
            Ok(())
        })?;
    }
    Ok(c)
}

/// The derive of hmpi's `Equivalence`.
fn expand(input: DeriveInput, default: syn::Path) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let krate = crate_path(&input, default)?;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "#[derive(Equivalence)] does not support generic parameters: implement \
             Equivalence by hand",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(Equivalence)] is for structs: an enum's bytes are not all valid values",
        ));
    };
    if !is_repr_c(&input)? {
        return Err(syn::Error::new_spanned(
            name,
            "#[derive(Equivalence)] needs #[repr(C)]: the layout of a Rust struct is not fixed",
        ));
    }
    let (members, types): (Vec<Member>, Vec<&syn::Type>) = match &data.fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|f| (Member::Named(f.ident.clone().expect("named field")), &f.ty))
            .unzip(),
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| (Member::Unnamed(Index::from(i)), &f.ty))
            .unzip(),
        Fields::Unit => (Vec::new(), Vec::new()),
    };
    let eq = quote!(#krate::datatype::Equivalence);
    let n = members.len();
    let msg = format!(
        "#[derive(Equivalence)]: {name} has padding bytes (its size is not the sum of its \
         fields' sizes); add explicit fields for the padding"
    );
    Ok(quote! {
        // The fields are Equivalence, and the struct has no padding.
        const _: () = {
            #[allow(dead_code)]
            fn fields_are_equivalence() {
                fn check<T: #eq>() {}
                #(check::<#types>();)*
            }
            assert!(
                ::core::mem::size_of::<#name>() == 0 #(+ ::core::mem::size_of::<#types>())*,
                #msg
            );
        };

        // SAFETY: every field is `Equivalence` (no padding of its own,
        // valid for every byte pattern, no pointers), and the struct adds
        // no padding (the size assertion above), whatever its field order:
        // so the struct is plain old data too. The datatype lists every
        // field at the offset the compiler gave it.
        unsafe impl #eq for #name {
            fn equivalent_datatype() -> #krate::datatype::Datatype {
                let lengths: [usize; #n] = [1; #n];
                let offsets: [isize; #n] = [
                    #(::core::mem::offset_of!(#name, #members) as isize),*
                ];
                let types: [#krate::datatype::Datatype; #n] = [
                    #(<#types as #eq>::equivalent_datatype()),*
                ];
                // The extent is the struct's size (what a struct type pads
                // to, unless the struct is packed): the stride of arrays.
                let size = ::core::mem::size_of::<#name>() as isize;
                let ty = #krate::datatype::UserDatatype::structured(&lengths, &offsets, &types)
                    .and_then(|t| #krate::datatype::UserDatatype::resized(&t, 0, size));
                match ty {
                    ::core::result::Result::Ok(t) => t.into(),
                    // Fields of a value in memory cannot overflow a type
                    // map; should it fail, the bytes describe it too.
                    ::core::result::Result::Err(_) => {
                        let bytes = #krate::datatype::Datatype::basic(
                            #krate::datatype::BasicType::Byte,
                        );
                        #krate::datatype::UserDatatype::contiguous(
                            ::core::mem::size_of::<#name>(),
                            &bytes,
                        )
                        .map(::core::convert::Into::into)
                        .unwrap_or(bytes)
                    }
                }
            }
        }
    })
}
