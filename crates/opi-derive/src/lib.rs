//! `#[derive(Transferable)]` for `opi::Transferable`.
//!
//! The derive implements the marker for a struct or enum whose fields are
//! all `Transferable` (each field type gets a `where` bound, so a field that
//! is a reference, a raw pointer, a function pointer, a trait object or an
//! `Rc` is a compile error), and every type parameter gets a
//! `Transferable` bound. It fills in:
//!
//! * `TYPE_HASH`: the FNV-1a hash of the type's path (`module_path!()` and
//!   its name), combined with the hashes of its type parameters and the
//!   values of its const parameters;
//! * `FLAT`: no field owns heap memory;
//! * `PLAIN`: structs only — every field is plain and the struct has no
//!   padding (its size is the sum of its fields' sizes); enums never are;
//! * `check_shared` / `make_shared`: field by field (variant by variant).
//!
//! Paths in the generated code start at `::hmpi::opi` (through the `hmpi`
//! facade), so that a crate depending only on `hmpi` can use the derive;
//! another path is given with `#[transferable(crate = "path")]` (`"opi"`
//! for a crate that uses `opi` directly). This is serde's
//! `#[serde(crate = …)]` pattern, the one `#[derive(Equivalence)]` follows
//! too; it needs no build dependency and no reading of `Cargo.toml`.
//!
//! # Example
//! ```ignore
//! use hmpi::Transferable;
//!
//! #[derive(Transferable)]
//! struct Particle { pos: [f64; 3], id: u64 }
//!
//! #[derive(opi::Transferable)]
//! #[transferable(crate = "opi")] // in a crate that depends on `opi` itself
//! struct Cell { id: u64 }
//! ```

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::{parse_macro_input, Data, DeriveInput, Fields, GenericParam, LitStr};

/// Derives `opi::Transferable` (see the crate docs).
#[proc_macro_derive(Transferable, attributes(transferable))]
pub fn derive_transferable(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The path of `opi` from `#[transferable(crate = "...")]`, `::hmpi::opi`
/// (the facade's re-export) by default.
fn crate_path(input: &DeriveInput) -> syn::Result<syn::Path> {
    let mut path: syn::Path = syn::parse_quote!(::hmpi::opi);
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("transferable"))
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

fn expand(input: DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let krate = crate_path(&input)?;
    let name_str = name.to_string();
    let mut generics = input.generics.clone();
    let mut param_hashes = Vec::new();
    for p in generics.params.iter_mut() {
        match p {
            GenericParam::Type(t) => {
                t.bounds.push(syn::parse_quote!(#krate::Transferable));
                let id = &t.ident;
                param_hashes.push(quote!(<#id as #krate::Transferable>::TYPE_HASH));
            }
            GenericParam::Const(c) => {
                let id = &c.ident;
                param_hashes.push(quote!((#id as u64)));
            }
            GenericParam::Lifetime(l) => {
                return Err(syn::Error::new_spanned(
                    l,
                    "Transferable types cannot borrow: a value that changes owner between \
                     processes must be 'static (no lifetime parameters)",
                ));
            }
        }
    }
    let field_types: Vec<syn::Type> = match &input.data {
        Data::Struct(s) => s.fields.iter().map(|f| f.ty.clone()).collect(),
        Data::Enum(e) => e
            .variants
            .iter()
            .flat_map(|v| v.fields.iter().map(|f| f.ty.clone()))
            .collect(),
        Data::Union(u) => {
            return Err(syn::Error::new_spanned(
                u.union_token,
                "Transferable cannot be derived for a union: which field holds the value is \
                 unknown, so its heap pointers cannot be checked",
            ))
        }
    };
    {
        let wc = generics.make_where_clause();
        for ty in &field_types {
            wc.predicates
                .push(syn::parse_quote!(#ty: #krate::Transferable));
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let flat = if field_types.is_empty() {
        quote!(true)
    } else {
        quote!(true #(&& <#field_types as #krate::Transferable>::FLAT)*)
    };
    let (plain, check, make) = match &input.data {
        Data::Struct(s) => {
            let plain = quote! {
                true #(&& <#field_types as #krate::Transferable>::PLAIN)*
                    && ::core::mem::size_of::<Self>()
                        == 0usize #(+ ::core::mem::size_of::<#field_types>())*
            };
            let members: Vec<syn::Member> = s
                .fields
                .iter()
                .enumerate()
                .map(|(i, f)| match &f.ident {
                    Some(id) => syn::Member::Named(id.clone()),
                    None => syn::Member::Unnamed(syn::Index::from(i)),
                })
                .collect();
            let check = quote! {
                true #(&& #krate::Transferable::check_shared(&self.#members))*
            };
            let make = quote! {
                #(#krate::Transferable::make_shared(&mut self.#members)?;)*
                ::core::result::Result::Ok(())
            };
            (plain, check, make)
        }
        Data::Enum(e) => {
            let mut check_arms = Vec::new();
            let mut make_arms = Vec::new();
            for v in &e.variants {
                let vid = &v.ident;
                let binds: Vec<syn::Ident> = (0..v.fields.len())
                    .map(|i| format_ident!("__opi_f{}", i))
                    .collect();
                let pat = match &v.fields {
                    Fields::Named(n) => {
                        let names = n.named.iter().map(|f| f.ident.clone());
                        quote!(Self::#vid { #(#names: #binds),* })
                    }
                    Fields::Unnamed(_) => quote!(Self::#vid ( #(#binds),* )),
                    Fields::Unit => quote!(Self::#vid),
                };
                check_arms.push(quote! {
                    #pat => true #(&& #krate::Transferable::check_shared(#binds))*,
                });
                make_arms.push(quote! {
                    #pat => { #(#krate::Transferable::make_shared(#binds)?;)* }
                });
            }
            let check = if e.variants.is_empty() {
                quote!(true)
            } else {
                quote!(match self { #(#check_arms)* })
            };
            let make = if e.variants.is_empty() {
                quote!(::core::result::Result::Ok(()))
            } else {
                quote! {
                    match self { #(#make_arms)* }
                    ::core::result::Result::Ok(())
                }
            };
            (quote!(false), check, make)
        }
        Data::Union(_) => unreachable!("rejected above"),
    };

    Ok(quote! {
        // SAFETY: every field is Transferable (the where clause), so a value
        // made of them stays valid in another rank of the same program once
        // every heap block they own is in the node heap, which
        // `check_shared` / `make_shared` see to field by field; `PLAIN` is
        // claimed only when every field is plain and there is no padding.
        unsafe impl #impl_generics #krate::Transferable for #name #ty_generics #where_clause {
            const TYPE_HASH: u64 = #krate::transfer::hash_combine(
                #krate::transfer::type_hash(::core::concat!(::core::module_path!(), "::", #name_str)),
                &[#(#param_hashes),*],
            );
            const FLAT: bool = #flat;
            const PLAIN: bool = #plain;
            #[allow(unused_variables)]
            fn check_shared(&self) -> bool {
                #check
            }
            #[allow(unused_variables)]
            fn make_shared(&mut self) -> ::core::result::Result<(), #krate::Error> {
                #make
            }
        }
    })
}
