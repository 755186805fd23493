//! Find the `#[cutile::module]` mod, its entries, and each entry's declared signature.

use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, FnArg, GenericArgument, GenericParam, Item, ItemFn, ItemMod, Meta, Pat,
    PathArguments, Token, Type, TypeParamBound, UseTree, Visibility, WherePredicate,
};

use crate::model::{Diagnostic, Entry, Failure, Generic, Param, ParamKind, Report, UseName};
use crate::text::{compact, tokens};
use crate::{allow, blockid, dataflow};

/// Parse a whole kernel file and describe its cutile module.
pub fn read_kernel(source: &str) -> Result<Report, Failure> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let file = syn::parse_file(source).map_err(|err| match err.into_iter().next() {
        Some(first) => Failure::at(format!("Rust syntax error: {first}"), first.span().start()),
        None => Failure::nowhere("Rust syntax error"),
    })?;

    let mut modules = Vec::new();
    collect_modules(&file.items, &mut modules);
    let Some(module) = modules.first().copied() else {
        return Err(Failure::nowhere("no `#[cutile::module]` mod in this file"));
    };
    let refused = allow::refusals(&file);
    if !refused.is_empty() {
        return Ok(Report {
            module: String::new(),
            entries: Vec::new(),
            warnings: Vec::new(),
            file_uses: Vec::new(),
            refused,
        });
    }

    let Some((_, items)) = &module.content else {
        return Err(Failure::at(
            "the `#[cutile::module]` mod must be inline (`mod m { ... }`), not loaded from a file",
            module.ident.span().start(),
        ));
    };

    let mut warnings = Vec::new();
    for extra in modules.iter().skip(1) {
        warnings.push(diag(
            "warning",
            format!(
                "more than one `#[cutile::module]` in the file; only `{}` is read",
                module.ident
            ),
            extra.ident.span(),
            "",
        ));
    }

    let mut entries = Vec::new();
    for item in items {
        if let Item::Fn(func) = item {
            if let Some(entry) = read_entry(func, &mut warnings) {
                entries.push(entry);
            }
        }
    }
    Ok(Report {
        module: module.ident.to_string(),
        entries,
        warnings,
        file_uses: file_uses(&file.items),
        refused: Vec::new(),
    })
}

/// Names brought in by the file's top-level `use` items. kernel.rs and ffi.rs are included into
/// one `mod <op>`, so these share a scope with ffi.rs's own imports.
fn file_uses(items: &[Item]) -> Vec<UseName> {
    let mut out = Vec::new();
    for item in items {
        if let Item::Use(u) = item {
            let line = u.use_token.span.start().line;
            let mut prefix = Vec::new();
            if u.leading_colon.is_some() {
                prefix.push(String::new()); // joins as a leading `::`
            }
            use_tree_names(&u.tree, &mut prefix, line, &mut out);
        }
    }
    out
}

fn use_tree_names(tree: &UseTree, prefix: &mut Vec<String>, line: usize, out: &mut Vec<UseName>) {
    let named = |name: String, path: Vec<String>| UseName {
        name,
        path: path.join("::"),
        glob: false,
        line,
    };
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_tree_names(&p.tree, prefix, line, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            // `a::b::{self}` binds `b`.
            if n.ident == "self" {
                if let Some(last) = prefix.last().filter(|l| !l.is_empty()) {
                    out.push(named(last.clone(), prefix.clone()));
                }
            } else {
                let mut path = prefix.clone();
                path.push(n.ident.to_string());
                out.push(named(n.ident.to_string(), path));
            }
        }
        UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(named(r.rename.to_string(), path));
        }
        UseTree::Glob(_) => out.push(UseName {
            name: "*".to_string(),
            path: prefix.join("::"),
            glob: true,
            line,
        }),
        UseTree::Group(g) => {
            for t in &g.items {
                use_tree_names(t, prefix, line, out);
            }
        }
    }
}

fn diag(
    level: &'static str,
    message: String,
    span: proc_macro2::Span,
    function: &str,
) -> Diagnostic {
    let start = span.start();
    Diagnostic {
        level,
        message,
        line: start.line,
        column: start.column + 1,
        function: function.to_string(),
    }
}

/// The path of an attribute as written, e.g. `cutile::entry` or `::cutile::entry`.
fn attr_path(attr: &Attribute) -> String {
    compact(attr.path())
}

fn collect_modules<'a>(items: &'a [Item], out: &mut Vec<&'a ItemMod>) {
    for item in items {
        if let Item::Mod(m) = item {
            if m.attrs.iter().any(|a| attr_path(a) == "cutile::module") {
                out.push(m);
            } else if let Some((_, inner)) = &m.content {
                collect_modules(inner, out);
            }
        }
    }
}

/// An entry when the fn carries `#[cutile::entry(...)]`; diagnostics for near misses.
fn read_entry(func: &ItemFn, warnings: &mut Vec<Diagnostic>) -> Option<Entry> {
    let name = func.sig.ident.to_string();
    let mut entry_attr = None;
    for attr in &func.attrs {
        let path = attr_path(attr);
        let last_is_entry = attr
            .path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "entry");
        if path == "cutile::entry" {
            match &attr.meta {
                Meta::List(list) => entry_attr = Some(list),
                _ => warnings.push(diag(
                    "error",
                    "entry attribute without parentheses produces no launcher: write `#[cutile::entry()]`"
                        .to_string(),
                    attr.span(),
                    &name,
                )),
            }
        } else if last_is_entry && path.contains("cutile") {
            warnings.push(diag(
                "error",
                format!("entry attribute spelled `{path}`: only `#[cutile::entry(...)]` produces a launcher"),
                attr.span(),
                &name,
            ));
        }
    }
    let list = entry_attr?;

    let attr_args = read_attr_args(list, &name, warnings);
    let generics = read_generics(func);
    let params = read_params(func, warnings);
    let flow = dataflow::analyse(&func.block, &params);
    let mut block = blockid::analyse(&func.block);
    block.grid_stride = flow.grid_stride.is_some();
    if let Some(step) = &flow.grid_stride {
        let stride = format!("for .. in ..step_by({step}) over get_num_tile_blocks()");
        block.evidence = if block.evidence.is_empty() {
            stride
        } else {
            format!("{}; {stride}", block.evidence)
        };
    }

    let mut outputs = Vec::new();
    for p in &params {
        if let ParamKind::Tensor { mutable: true, .. } = p.kind {
            outputs.push((p.name.clone(), "&mut".to_string()));
        } else if let ParamKind::Partition {
            mutable: true,
            name: type_name,
            ..
        } = &p.kind
        {
            // An output by its type, like `&mut Tensor`: the launcher lowers it as a KernelOutput.
            outputs.push((p.name.clone(), type_name.clone()));
        } else if let Some(sink) = flow.sinks.get(&p.name) {
            outputs.push((p.name.clone(), sink.name.clone()));
        }
    }

    Some(Entry {
        name,
        line: func.sig.ident.span().start().line,
        is_unsafe: func.sig.unsafety.is_some(),
        public: matches!(func.vis, Visibility::Public(_)),
        attr_args,
        generics,
        params,
        outputs,
        block,
    })
}

fn read_attr_args(
    list: &syn::MetaList,
    func: &str,
    warnings: &mut Vec<Diagnostic>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let metas = match list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) {
        Ok(m) => m,
        Err(err) => {
            warnings.push(diag(
                "warning",
                format!("entry attribute arguments are not `key = value` pairs: {err}"),
                err.span(),
                func,
            ));
            return out;
        }
    };
    for meta in metas {
        match meta {
            Meta::NameValue(nv) => out.push((compact(&nv.path), tokens(&nv.value))),
            Meta::Path(p) => warnings.push(diag(
                "warning",
                format!(
                    "bare flag `{0}` is ignored by cutile: write `{0} = true`",
                    compact(&p)
                ),
                p.span(),
                func,
            )),
            Meta::List(l) => warnings.push(diag(
                "warning",
                format!(
                    "entry argument `{}` is not `key = value` and is ignored by cutile",
                    compact(&l.path)
                ),
                l.span(),
                func,
            )),
        }
    }
    out
}

fn read_generics(func: &ItemFn) -> Vec<Generic> {
    let mut out = Vec::new();
    for param in &func.sig.generics.params {
        match param {
            GenericParam::Type(t) => {
                let mut bounds: Vec<String> = t.bounds.iter().map(bound_text).collect();
                if let Some(wc) = &func.sig.generics.where_clause {
                    for pred in &wc.predicates {
                        if let WherePredicate::Type(pt) = pred {
                            if t.ident == compact(&pt.bounded_ty) {
                                bounds.extend(pt.bounds.iter().map(bound_text));
                            }
                        }
                    }
                }
                out.push(Generic::Type {
                    name: t.ident.to_string(),
                    bounds,
                });
            }
            GenericParam::Const(c) => out.push(Generic::Const {
                name: c.ident.to_string(),
                ty: compact(&c.ty),
            }),
            GenericParam::Lifetime(_) => {}
        }
    }
    out
}

fn bound_text(b: &TypeParamBound) -> String {
    compact(b)
}

fn read_params(func: &ItemFn, warnings: &mut Vec<Diagnostic>) -> Vec<Param> {
    let fname = func.sig.ident.to_string();
    let mut out = Vec::new();
    for arg in &func.sig.inputs {
        let FnArg::Typed(pt) = arg else {
            warnings.push(diag(
                "warning",
                "entry takes `self`".to_string(),
                arg.span(),
                &fname,
            ));
            continue;
        };
        let name = match &*pt.pat {
            Pat::Ident(pi) => pi.ident.to_string(),
            other => compact(other),
        };
        let kind = classify(&pt.ty);
        if let ParamKind::Tensor { shape: None, .. } = &kind {
            warnings.push(diag(
                "warning",
                format!("tensor parameter `{name}`: shape is not an array literal, rank unknown"),
                pt.ty.span(),
                &fname,
            ));
        }
        out.push(Param { name, kind });
    }
    out
}

fn strip_group(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => strip_group(&g.elem),
        Type::Paren(p) => strip_group(&p.elem),
        other => other,
    }
}

/// The cutile partition types an entry may name as a parameter type.
const PARTITION_TYPES: [&str; 3] = ["Partition", "PartitionMut", "MappedPartitionMut"];

/// Parameter type -> tensor / pointer / partition / scalar.
pub fn classify(ty: &Type) -> ParamKind {
    match strip_group(ty) {
        Type::Reference(r) => {
            if let Some((elem, shape)) = tensor_args(strip_group(&r.elem)) {
                return ParamKind::Tensor {
                    elem,
                    mutable: r.mutability.is_some(),
                    shape,
                };
            }
            // `&mut MappedPartitionMut<..>` is refused by the macro, but it is still a partition.
            if let Some(kind) = partition(strip_group(&r.elem), ty) {
                return kind;
            }
        }
        Type::Path(_) => {
            if let Some(kind) = partition(strip_group(ty), ty) {
                return kind;
            }
        }
        Type::Ptr(p) => {
            return ParamKind::Ptr {
                elem: compact(&p.elem),
                mutable: p.mutability.is_some(),
            };
        }
        _ => {}
    }
    ParamKind::Scalar { ty: compact(ty) }
}

/// `MappedPartitionMut<E, {[BM]}, M>` (last path segment one of `PARTITION_TYPES`) -> a partition
/// of element `E`; `written` is the parameter type as declared, reference included.
fn partition(ty: &Type, written: &Type) -> Option<ParamKind> {
    let Type::Path(tp) = ty else { return None };
    let last = tp.path.segments.last()?;
    let name = last.ident.to_string();
    if !PARTITION_TYPES.contains(&name.as_str()) {
        return None;
    }
    // `Partition<'a, E, D>`: the element is the first type argument, after any lifetime.
    let elem = match &last.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .find_map(|a| match a {
                GenericArgument::Type(t) => Some(compact(t)),
                _ => None,
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    Some(ParamKind::Partition {
        elem,
        mutable: name.ends_with("Mut"),
        name,
        ty: compact(written),
    })
}

/// `Tensor<E, {[d0, d1]}>` -> `("E", Some(["d0", "d1"]))`.
fn tensor_args(ty: &Type) -> Option<(String, Option<Vec<String>>)> {
    let Type::Path(tp) = ty else { return None };
    let last = tp.path.segments.last()?;
    if last.ident != "Tensor" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut it = args.args.iter();
    let elem = match it.next()? {
        GenericArgument::Type(t) => compact(t),
        other => compact(other),
    };
    let shape = it.next().and_then(shape_elements);
    Some((elem, shape))
}

fn shape_elements(arg: &GenericArgument) -> Option<Vec<String>> {
    let GenericArgument::Const(expr) = arg else {
        return None;
    };
    array_of(expr)
}

fn array_of(expr: &Expr) -> Option<Vec<String>> {
    match expr {
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(inner, None) => array_of(inner),
            _ => None,
        },
        Expr::Paren(p) => array_of(&p.expr),
        Expr::Group(g) => array_of(&g.expr),
        Expr::Array(a) => Some(a.elems.iter().map(compact).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{classify, read_kernel};
    use crate::model::{ParamKind, UseName};

    fn kind(src: &str) -> ParamKind {
        classify(&syn::parse_str::<syn::Type>(src).unwrap())
    }

    fn partition(src: &str) -> (String, bool, String, String) {
        match kind(src) {
            ParamKind::Partition {
                elem,
                mutable,
                name,
                ty,
            } => (elem, mutable, name, ty),
            other => panic!("{src}: not a partition: {other:?}"),
        }
    }

    #[test]
    fn partition_types_are_their_own_kind() {
        let (elem, mutable, name, ty) = partition("MappedPartitionMut<E, { [BM, BN] }, MAP_SHAPE>");
        assert_eq!(
            (elem.as_str(), mutable, name.as_str()),
            ("E", true, "MappedPartitionMut")
        );
        assert_eq!(ty, "MappedPartitionMut<E, {[BM, BN]}, MAP_SHAPE>");
        // The element is the first type argument, after the lifetime.
        let (elem, mutable, name, _) = partition("Partition<'a, f32, { [B] }>");
        assert_eq!(
            (elem.as_str(), mutable, name.as_str()),
            ("f32", false, "Partition")
        );
        let (_, mutable, name, _) = partition("cutile::core::PartitionMut<'a, E, { [B] }>");
        assert_eq!((mutable, name.as_str()), (true, "PartitionMut"));
        let (_, mutable, _, ty) = partition("&mut MappedPartitionMut<E, { [B] }, M>");
        assert!(mutable);
        assert_eq!(ty, "&mut MappedPartitionMut<E, {[B]}, M>");
        // Neighbours keep their kinds.
        assert!(matches!(
            kind("&Tensor<E, { [-1] }>"),
            ParamKind::Tensor { .. }
        ));
        assert!(matches!(kind("*mut E"), ParamKind::Ptr { .. }));
        assert!(matches!(kind("PartitionIndex"), ParamKind::Scalar { .. }));
        assert!(matches!(kind("i32"), ParamKind::Scalar { .. }));
    }

    #[test]
    fn mutable_partition_is_an_output_by_its_type() {
        let src = "#[cutile::module] mod m {\n #[cutile::entry()] fn k<E: ElementType, const B: i32, const M: [i32; 1]>(\n z: MappedPartitionMut<E, { [B] }, M>, p: Partition<'static, E, { [B] }>, x: &Tensor<E, { [-1] }>) {}\n}";
        let report = read_kernel(src).unwrap();
        let e = &report.entries[0];
        // No store in the body: the type alone makes `z` an output; `p` is read-only.
        assert_eq!(
            e.outputs,
            [("z".to_string(), "MappedPartitionMut".to_string())]
        );
        assert!(e.params[1].is_memory());
    }

    #[test]
    fn file_uses_list_every_bound_name() {
        let src = "use cuda_core::{Device, Stream as S, self};\nuse ::std::ffi::c_void;\n\
                   pub use cutile::prelude::*;\nuse a::b::{self as bee, c::{d, _e as _}};\n\
                   #[cutile::module] mod m { use cutile::core::*; }\nmod inner { use x::Y; }\n";
        let report = read_kernel(src).unwrap();
        let got: Vec<(String, String, bool, usize)> = report
            .file_uses
            .iter()
            .map(
                |UseName {
                     name,
                     path,
                     glob,
                     line,
                 }| (name.clone(), path.clone(), *glob, *line),
            )
            .collect();
        let want = [
            ("Device", "cuda_core::Device", false, 1),
            ("S", "cuda_core::Stream", false, 1),
            ("cuda_core", "cuda_core", false, 1),
            ("c_void", "::std::ffi::c_void", false, 2),
            ("*", "cutile::prelude", true, 3),
            ("bee", "a::b", false, 4),
            ("d", "a::b::c::d", false, 4),
            ("_", "a::b::c::_e", false, 4),
        ];
        let want: Vec<(String, String, bool, usize)> = want
            .iter()
            .map(|(n, p, g, l)| (n.to_string(), p.to_string(), *g, *l))
            .collect();
        // Uses inside the cutile module or another mod are not in the file's scope.
        assert_eq!(got, want);
    }

    #[test]
    fn syntax_error_position() {
        let err = read_kernel("mod m {\n  fn f() { let = ; }\n}\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.column > 1);
    }

    #[test]
    fn entry_needs_list_attribute() {
        let src = "#[cutile::module] mod m {\n #[cutile::entry] fn a() {}\n #[cutile::entry()] fn b() {}\n fn c() {}\n}";
        let report = read_kernel(src).unwrap();
        assert_eq!(report.module, "m");
        let names: Vec<_> = report.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert_eq!(report.warnings.len(), 1);
        assert_eq!(report.warnings[0].level, "error");
        assert_eq!(report.warnings[0].line, 2);
    }
}
