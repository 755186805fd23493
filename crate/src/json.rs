//! The printed document (`schema_version` 1, `docs/reader-schema.md`). Keys keep insertion order.

use serde_json::{json, Map, Value};

use crate::model::{Diagnostic, Entry, Failure, Generic, Param, ParamKind, Report, UseName};

pub const SCHEMA_VERSION: u32 = 1;

pub fn report(path: &str, report: &Report) -> Value {
    let mut doc = Map::new();
    doc.insert("schema_version".into(), json!(SCHEMA_VERSION));
    doc.insert("path".into(), json!(path));
    doc.insert("module".into(), json!(report.module));
    doc.insert(
        "entries".into(),
        Value::Array(report.entries.iter().map(entry).collect()),
    );
    doc.insert(
        "warnings".into(),
        Value::Array(report.warnings.iter().map(diagnostic).collect()),
    );
    doc.insert(
        "file_uses".into(),
        Value::Array(report.file_uses.iter().map(use_name).collect()),
    );
    doc.insert(
        "refused".into(),
        Value::Array(report.refused.iter().map(refusal).collect()),
    );
    Value::Object(doc)
}

pub fn failure(path: &str, failure: &Failure) -> Value {
    let mut err = Map::new();
    err.insert("message".into(), json!(failure.message));
    err.insert("line".into(), json!(failure.line));
    err.insert("column".into(), json!(failure.column));
    let mut doc = Map::new();
    doc.insert("schema_version".into(), json!(SCHEMA_VERSION));
    doc.insert("path".into(), json!(path));
    doc.insert("error".into(), Value::Object(err));
    Value::Object(doc)
}

fn entry(e: &Entry) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(e.name));
    m.insert("line".into(), json!(e.line));
    m.insert("unsafe".into(), json!(e.is_unsafe));
    m.insert("public".into(), json!(e.public));
    let mut args = Map::new();
    for (k, v) in &e.attr_args {
        args.insert(k.clone(), json!(v));
    }
    m.insert("attr_args".into(), Value::Object(args));
    m.insert(
        "generics".into(),
        Value::Array(e.generics.iter().map(generic).collect()),
    );
    m.insert(
        "params".into(),
        Value::Array(e.params.iter().map(param).collect()),
    );
    m.insert(
        "outputs".into(),
        Value::Array(e.outputs.iter().map(|(n, _)| json!(n)).collect()),
    );
    let mut evidence = Map::new();
    for (n, ev) in &e.outputs {
        evidence.insert(n.clone(), json!(ev));
    }
    m.insert("output_evidence".into(), Value::Object(evidence));
    let mut block = Map::new();
    block.insert("axes".into(), json!(e.block.axes));
    block.insert("grid_stride".into(), json!(e.block.grid_stride));
    block.insert("evidence".into(), json!(e.block.evidence));
    m.insert("block".into(), Value::Object(block));
    Value::Object(m)
}

fn generic(g: &Generic) -> Value {
    let mut m = Map::new();
    match g {
        Generic::Type { name, bounds } => {
            m.insert("name".into(), json!(name));
            m.insert("kind".into(), json!("type"));
            m.insert("bounds".into(), json!(bounds));
        }
        Generic::Const { name, ty } => {
            m.insert("name".into(), json!(name));
            m.insert("kind".into(), json!("const"));
            m.insert("ty".into(), json!(ty));
        }
    }
    Value::Object(m)
}

fn param(p: &Param) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(p.name));
    match &p.kind {
        ParamKind::Tensor {
            elem,
            mutable,
            shape,
        } => {
            m.insert("kind".into(), json!("tensor"));
            m.insert("elem".into(), json!(elem));
            m.insert("rank".into(), json!(shape.as_ref().map(Vec::len)));
            m.insert("mutable".into(), json!(mutable));
            m.insert("shape".into(), json!(shape));
        }
        ParamKind::Ptr { elem, mutable } => {
            m.insert("kind".into(), json!("ptr"));
            m.insert("elem".into(), json!(elem));
            m.insert("mutable".into(), json!(mutable));
        }
        ParamKind::Partition {
            elem, mutable, ty, ..
        } => {
            m.insert("kind".into(), json!("partition"));
            m.insert("elem".into(), json!(elem));
            m.insert("mutable".into(), json!(mutable));
            m.insert("partition_type".into(), json!(ty));
        }
        ParamKind::Scalar { ty } => {
            m.insert("kind".into(), json!("scalar"));
            m.insert("ty".into(), json!(ty));
        }
    }
    Value::Object(m)
}

fn refusal(r: &crate::allow::Refusal) -> Value {
    json!({"line": r.line, "column": r.column, "what": r.what})
}

fn use_name(u: &UseName) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(u.name));
    m.insert("path".into(), json!(u.path));
    m.insert("glob".into(), json!(u.glob));
    m.insert("line".into(), json!(u.line));
    Value::Object(m)
}

fn diagnostic(d: &Diagnostic) -> Value {
    let mut m = Map::new();
    m.insert("level".into(), json!(d.level));
    m.insert("message".into(), json!(d.message));
    m.insert("line".into(), json!(d.line));
    m.insert("column".into(), json!(d.column));
    m.insert("function".into(), json!(d.function));
    Value::Object(m)
}
