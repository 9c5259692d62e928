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
    it.all(|c| c.is_ascii_alphanumeric() || "_./>-".contains(c))
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

/// Whether an HLO instruction's metadata says the program trains (XProf
/// `ModelTracker::IsTraining`): a TensorFlow op (`op_type` and `op_name` shaped as TF's) under a
/// `gradients…` or `gradient_tape` name scope, or a JAX op (no `op_type`, or a lowercase one
/// that the last `/` part of `op_name` contains) with a `transpose(…` name scope, which JAX
/// writes for the backward pass (`transpose(jvp(…))`; a plain `transpose[permutation=…]` is
/// not one).
pub fn is_training_op(op_name: &str, op_type: &str) -> bool {
    if is_tf_op_type(op_type) && is_tf_op_name(op_name) {
        let scopes = op_name.rsplit_once('/').map_or("", |(scopes, _)| scopes);
        return !scopes.is_empty()
            && scopes.split('/').any(|scope| {
                scope
                    .strip_prefix("gradient")
                    .is_some_and(|rest| rest == "_tape" || rest.starts_with('s'))
            });
    }
    // JAX leaves `op_type` out of most instructions: XProf then reads the name alone.
    let jax = op_type.is_empty()
        || (!op_name.is_empty()
            && is_jax_op_type(op_type)
            && op_name.rsplit('/').next().unwrap_or("").contains(op_type));
    jax && op_name
        .split('/')
        .any(|scope| scope.starts_with("transpose("))
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

/// XProf's framework-op full name of an HLO op (`TfOpFullname`): `<op_name>:<op_type>`, empty
/// when both are empty; XLA's argument and result ops are typed by their own name.
pub fn tf_op_fullname(op_name: &str, op_type: &str) -> String {
    if op_type.is_empty() {
        if op_name.is_empty() {
            return String::new();
        }
        if op_name == "XLA_Args" || op_name == "XLA_Retvals" {
            return format!("{op_name}:{op_name}");
        }
    }
    format!("{op_name}:{op_type}")
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
    fn training_ops_are_gradient_scopes_of_tensorflow_and_jax_transposes() {
        // TensorFlow: a `gradients…` or `gradient_tape` scope, not the op's own name.
        assert!(is_training_op(
            "gradient_tape/sequential/dense/MatMul",
            "MatMul"
        ));
        assert!(is_training_op(
            "model/gradients_2/dense/MatMul_grad/MatMul",
            "MatMul"
        ));
        assert!(!is_training_op("model/gradient_checks/MatMul", "MatMul"));
        assert!(!is_training_op("model/dense/gradients", "Identity"));
        assert!(!is_training_op("sequential/dense/MatMul", "MatMul"));
        // JAX: a `transpose(` scope, and an op type that names the op.
        assert!(is_training_op(
            "jit(train_step)/transpose(jvp(mlp))/dot_general",
            "dot_general"
        ));
        assert!(!is_training_op(
            "jit(f)/transpose[permutation=(1, 0)]",
            "transpose"
        ));
        assert!(!is_training_op(
            "jit(f)/transpose(jvp(mlp))/dot_general",
            "add"
        ));
        assert!(!is_training_op("", "add"));
        assert!(is_training_op(
            "jit(train_step)/transpose(jvp(mlp))/dense_1/reduce_sum",
            ""
        ));
        assert!(!is_training_op(
            "jit(train_step)/jvp(mlp)/dense_1/dot_general",
            ""
        ));
        // Backslashes are not part of a TensorFlow op name.
        assert!(!is_training_op("gradients\\x/MatMul", "MatMul"));
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
