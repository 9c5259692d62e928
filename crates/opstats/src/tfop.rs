//! Framework-op names: XProf's `ParseTfOpFullname` rules (`xla/tsl/profiler/utils/tf_op_utils.cc`),
//! restated. A host event is a framework op when its name (or its `tf_op` stat) parses to a
//! known category.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfOpCategory {
    Unknown,
    TensorFlow,
    Jax,
    TfData,
    MemcpyHToD,
    MemcpyDToH,
    MemcpyDToD,
    MemcpyHToH,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfOp<'a> {
    pub category: TfOpCategory,
    pub name: &'a str,
    /// Op type; empty for unknown ops.
    pub kind: &'a str,
}

/// `[A-Za-z0-9.][A-Za-z0-9_.\/>-]*`
fn is_tf_op_name(s: &str) -> bool {
    let mut it = s.chars();
    match it.next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '.' => {}
        _ => return false,
    }
    it.all(|c| c.is_ascii_alphanumeric() || "_./\\>-".contains(c))
}

/// `[A-Z_][a-zA-Z0-9_]*`
fn is_tf_op_type(s: &str) -> bool {
    let mut it = s.chars();
    match it.next() {
        Some(c) if c.is_ascii_uppercase() || c == '_' => {}
        _ => return false,
    }
    it.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `[a-z_][a-z0-9_]*(\[.*\])?`
fn is_jax_op_type(s: &str) -> bool {
    let (head, rest) = match s.find('[') {
        Some(i) => (&s[..i], Some(&s[i..])),
        None => (s, None),
    };
    let mut it = head.chars();
    match it.next() {
        Some(c) if c.is_ascii_lowercase() || c == '_' => {}
        _ => return false,
    }
    if !it.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return false;
    }
    rest.is_none_or(|r| r.ends_with(']'))
}

/// The op type derived from a full op name: last `/` segment without a numeric `_N` suffix.
fn derive_op_type(full: &str) -> &str {
    let op = full.rsplit('/').next().unwrap_or(full);
    match op.rsplit_once('_') {
        Some((head, suffix)) if !suffix.is_empty() && suffix.parse::<i64>().is_ok() => head,
        _ => op,
    }
}

fn memcpy(name: &str) -> Option<TfOpCategory> {
    let starts = |p: &str| {
        name.len() >= p.len() && name.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
    };
    [
        ("memcpyhtod", TfOpCategory::MemcpyHToD),
        ("memcpydtoh", TfOpCategory::MemcpyDToH),
        ("memcpydtod", TfOpCategory::MemcpyDToD),
        ("memcpyhtoh", TfOpCategory::MemcpyHToH),
    ]
    .into_iter()
    .find(|(p, _)| starts(p))
    .map(|(_, c)| c)
}

pub fn parse_tf_op(full: &str) -> TfOp<'_> {
    let unknown = TfOp {
        category: TfOpCategory::Unknown,
        name: full,
        kind: "",
    };
    let Some((name, kind)) = full.split_once(':') else {
        if let Some(c) = memcpy(full) {
            let kind = match c {
                TfOpCategory::MemcpyHToD => "MemcpyHToD",
                TfOpCategory::MemcpyDToH => "MemcpyDToH",
                TfOpCategory::MemcpyDToD => "MemcpyDToD",
                _ => "MemcpyHToH",
            };
            return TfOp {
                category: c,
                name: full,
                kind,
            };
        }
        return unknown;
    };
    if name == "Iterator" {
        return TfOp {
            category: TfOpCategory::TfData,
            name: full,
            kind: "Dataset",
        };
    }
    if is_tf_op_name(name) && is_tf_op_type(kind) {
        return TfOp {
            category: TfOpCategory::TensorFlow,
            name,
            kind,
        };
    }
    let op_type = if kind.is_empty() {
        derive_op_type(name)
    } else {
        kind
    };
    if is_jax_op_type(op_type) {
        let t = op_type.split('[').next().unwrap_or(op_type);
        return TfOp {
            category: TfOpCategory::Jax,
            name,
            kind: t,
        };
    }
    if kind.is_empty() {
        return TfOp {
            category: TfOpCategory::TensorFlow,
            name,
            kind: op_type,
        };
    }
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jax_provenance_with_trailing_colon() {
        let t = parse_tf_op("jit(matmul_optimized)/pallas_call:");
        assert_eq!(t.category, TfOpCategory::Jax);
        assert_eq!(
            (t.name, t.kind),
            ("jit(matmul_optimized)/pallas_call", "pallas_call")
        );
    }

    #[test]
    fn tensorflow_and_unknown_names() {
        let t = parse_tf_op("model/dense/MatMul:MatMul");
        assert_eq!((t.category, t.kind), (TfOpCategory::TensorFlow, "MatMul"));
        assert_eq!(
            parse_tf_op("MutexLock::Acquire").category,
            TfOpCategory::Unknown
        );
        assert_eq!(parse_tf_op("$file.py:12 f").category, TfOpCategory::Unknown);
        assert_eq!(
            parse_tf_op("PjitFunction(f)").category,
            TfOpCategory::Unknown
        );
        assert_eq!(
            parse_tf_op("Iterator::Batch").category,
            TfOpCategory::TfData
        );
        assert_eq!(parse_tf_op("MemcpyHToD").category, TfOpCategory::MemcpyHToD);
        let t = parse_tf_op("a/transpose[permutation=(1, 0)]:");
        assert_eq!((t.category, t.kind), (TfOpCategory::Jax, "transpose"));
        let t = parse_tf_op("scope/Conv2D_1:");
        assert_eq!((t.category, t.kind), (TfOpCategory::TensorFlow, "Conv2D"));
    }
}
