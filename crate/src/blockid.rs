//! How many block-id axes an entry reads (`get_tile_block_id()`).
//!
//! - `get_tile_block_id().N` or `bid.N` (with `let bid = get_tile_block_id();`) uses axes 0..=N;
//! - `let (a, b, _c) = get_tile_block_id();` uses the axes up to the last binding whose name
//!   does not start with `_`;
//! - any other use of the whole triple counts as all three axes.
//!
//! The result is the largest count found; `evidence` is the text of the first use giving it.
//! The grid-stride part of the block facts comes from `dataflow`.

use std::collections::BTreeSet;

use syn::visit::{self, Visit};
use syn::{Block, Expr, ExprField, Local, Member, Pat};

use crate::model::BlockUse;
use crate::text::compact;

const BLOCK_ID: &str = "get_tile_block_id";

pub fn analyse(body: &Block) -> BlockUse {
    // Pass 1: names bound to the whole triple.
    let mut aliases = AliasFinder::default();
    aliases.visit_block(body);
    // Pass 2: uses.
    let mut uses = Uses {
        aliases: aliases.names,
        best: BlockUse::default(),
    };
    uses.visit_block(body);
    uses.best
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        other => other,
    }
}

fn is_block_id_call(expr: &Expr) -> bool {
    match strip(expr) {
        Expr::Call(call) => match strip(&call.func) {
            Expr::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == BLOCK_ID),
            _ => false,
        },
        _ => false,
    }
}

fn strip_pat(pat: &Pat) -> &Pat {
    match pat {
        Pat::Type(t) => strip_pat(&t.pat),
        Pat::Paren(p) => strip_pat(&p.pat),
        other => other,
    }
}

#[derive(Default)]
struct AliasFinder {
    names: BTreeSet<String>,
}

impl<'ast> Visit<'ast> for AliasFinder {
    fn visit_local(&mut self, local: &'ast Local) {
        if let Some(init) = &local.init {
            if is_block_id_call(&init.expr) {
                if let Pat::Ident(pi) = strip_pat(&local.pat) {
                    self.names.insert(pi.ident.to_string());
                }
            }
        }
        visit::visit_local(self, local);
    }
}

struct Uses {
    aliases: BTreeSet<String>,
    best: BlockUse,
}

impl Uses {
    fn offer(&mut self, axes: usize, evidence: String) {
        if axes > self.best.axes {
            self.best.axes = axes;
            self.best.evidence = evidence;
        }
    }

    fn is_alias(&self, expr: &Expr) -> Option<String> {
        match strip(expr) {
            Expr::Path(p) if p.path.segments.len() == 1 => {
                let name = p.path.segments[0].ident.to_string();
                self.aliases.contains(&name).then_some(name)
            }
            _ => None,
        }
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_local(&mut self, local: &'ast Local) {
        if let Some(init) = &local.init {
            if is_block_id_call(&init.expr) {
                match strip_pat(&local.pat) {
                    Pat::Tuple(t) => {
                        let used =
                            t.elems
                                .iter()
                                .enumerate()
                                .filter_map(|(i, p)| match strip_pat(p) {
                                    Pat::Ident(pi) if !pi.ident.to_string().starts_with('_') => {
                                        Some(i + 1)
                                    }
                                    _ => None,
                                });
                        if let Some(axes) = used.max() {
                            self.offer(axes, format!("let {} = {BLOCK_ID}()", compact(&local.pat)));
                        }
                    }
                    Pat::Ident(_) | Pat::Wild(_) => {}
                    other => self.offer(3, format!("let {} = {BLOCK_ID}()", compact(other))),
                }
                if let Some((_, diverge)) = &init.diverge {
                    self.visit_expr(diverge);
                }
                return; // the call itself has been accounted for
            }
        }
        visit::visit_local(self, local);
    }

    fn visit_expr_field(&mut self, field: &'ast ExprField) {
        let index = match &field.member {
            Member::Unnamed(i) => Some(i.index as usize),
            Member::Named(_) => None,
        };
        if let Some(i) = index {
            if is_block_id_call(&field.base) {
                self.offer(i + 1, format!("{BLOCK_ID}().{i}"));
                return;
            }
            if let Some(name) = self.is_alias(&field.base) {
                self.offer(i + 1, format!("{name}.{i} (let {name} = {BLOCK_ID}())"));
                return;
            }
        }
        visit::visit_expr_field(self, field);
    }

    fn visit_expr(&mut self, expr: &'ast Expr) {
        if is_block_id_call(expr) {
            self.offer(3, format!("{BLOCK_ID}() used as a whole"));
            return;
        }
        if let Some(name) = self.is_alias(expr) {
            self.offer(3, format!("{name} = {BLOCK_ID}() used as a whole"));
            return;
        }
        visit::visit_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use super::analyse;

    fn axes(body: &str) -> (usize, String) {
        let block: syn::Block = syn::parse_str(body).unwrap();
        let b = analyse(&block);
        (b.axes, b.evidence)
    }

    #[test]
    fn counts_axes() {
        assert_eq!(axes("{ }").0, 0);
        assert_eq!(axes("{ let a: i32 = get_tile_block_id().0; }").0, 1);
        assert_eq!(axes("{ let (a, _, _) = get_tile_block_id(); }").0, 1);
        assert_eq!(axes("{ let (a, b, _c) = get_tile_block_id(); }").0, 2);
        assert_eq!(
            axes("{ let (a, b, c): (i32, i32, i32) = get_tile_block_id(); }").0,
            3
        );
        assert_eq!(
            axes("{ let bid = get_tile_block_id(); let y = bid.1; }").0,
            2
        );
        assert_eq!(axes("{ let bid = get_tile_block_id(); f(bid); }").0, 3);
        assert_eq!(axes("{ f(get_tile_block_id()); }").0, 3);
        assert_eq!(
            axes("{ let x = get_tile_block_id().2; }").1,
            "get_tile_block_id().2"
        );
    }
}
