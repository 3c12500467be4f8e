//! Plain-data conversion between Monty values and Python values.
//!
//! The value contract (SPEC §3): None, bool, int (any size), float (NaN and infinities
//! included), str, bytes, list, tuple, dict, set and frozenset cross the boundary. Anything else is an
//! error naming the type and where it sits (`value['items'][2]`), never a crash.
//! Nesting deeper than [`MAX_DEPTH`] levels is refused the same way.
//!
//! Monty 1.4 hands values over as a node arena (children before parents, shared
//! sub-objects stored once); conversions walk it by node id and convert each shared
//! node once, so a small heap graph never expands into an exponentially larger value.

use crate::engine::interp::unstable::{self, MontyGraph, MontyNode, NodeId};
use crate::engine::interp::{MontyObject, ObjectRef};
use num_bigint::BigInt;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple,
};

/// Deepest nesting of containers that may cross the boundary, in levels: the one limit of
/// the plain-data contract, exported as `MAX_VALUE_DEPTH` and read by every Python layer
/// (`codeact.runtime._values`). 100, not more: a value that crosses is also journaled and
/// stored as JSON, which pydantic's parser reads back only to about 200 levels, and the
/// journal's tagged form of a tuple or a set takes two levels per container.
pub const MAX_DEPTH: usize = 100;

/// Where a value sits, rendered lazily only when an error is reported.
#[derive(Clone)]
enum Step {
    Index(usize),
    Key(String),
}

fn render_path(root: &str, steps: &[Step]) -> String {
    let mut out = root.to_string();
    for step in steps {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) => out.push_str(&format!("[{k}]")),
        }
    }
    out
}

/// A value that cannot cross: what it is and where it sits.
pub struct ConvertError {
    pub type_name: String,
    pub path: String,
    pub too_deep: bool,
}

impl ConvertError {
    pub fn describe(&self) -> String {
        if self.too_deep {
            format!("{} nests deeper than {MAX_DEPTH} levels", self.path)
        } else {
            format!(
                "{} is {} {}, which cannot cross the boundary (allowed: None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset)",
                self.path,
                article(&self.type_name),
                self.type_name
            )
        }
    }
}

fn key_label(key: V<'_>) -> String {
    match key.node() {
        MontyNode::String(s) => format!("{s:?}").replace('"', "'"),
        _ => key.r().py_repr(),
    }
}

/// One node of an arena: the arena plus the node's id.
#[derive(Clone, Copy)]
pub struct V<'a> {
    g: &'a MontyGraph,
    id: NodeId,
}

impl<'a> V<'a> {
    /// The view of a whole value.
    pub fn of(value: &'a MontyObject) -> Self {
        let (g, id) = unstable::graph_parts(value);
        Self { g, id }
    }

    /// The view of one node of `g`.
    pub fn at(g: &'a MontyGraph, id: NodeId) -> Self {
        Self { g, id }
    }

    fn node(self) -> &'a MontyNode {
        self.g.node(self.id)
    }

    fn child(self, id: NodeId) -> Self {
        Self { g: self.g, id }
    }

    /// The public view, for repr and type names.
    pub fn r(self) -> ObjectRef<'a> {
        self.g.value(self.id)
    }
}

// ---------------------------------------------------------------- Monty -> Python

/// Converts a Monty value to a Python value; `root` names it in errors (e.g. `result`).
pub fn monty_to_py(
    py: Python<'_>,
    value: &MontyObject,
    root: &str,
) -> Result<Py<PyAny>, ConvertError> {
    ref_to_py(py, V::of(value), root)
}

/// Converts one node of an arena (e.g. one call argument) to a Python value.
pub fn ref_to_py(py: Python<'_>, value: V<'_>, root: &str) -> Result<Py<PyAny>, ConvertError> {
    // Most tool arguments and results are scalars: no path or memo to set up for them.
    if let Some(obj) = scalar_to_py(py, value.node()) {
        return Ok(obj.unbind());
    }
    let mut steps = Vec::new();
    let mut memo = Memo::default();
    to_py(py, value, root, &mut steps, &mut memo).map(Bound::unbind)
}

/// Python objects already built for shared nodes, with the height of each node's subtree.
#[derive(Default)]
struct Memo<'py> {
    built: std::collections::HashMap<u32, (Bound<'py, PyAny>, usize)>,
}

/// A readable type name; values Monty only hands out as a repr (functions, classes,
/// modules) are named from that repr.
fn monty_type_label(value: V<'_>) -> String {
    match value.node() {
        MontyNode::Repr(text) | MontyNode::Cycle(text) => {
            let kind = text
                .trim_start_matches('<')
                .split([' ', '\'', '>'])
                .next()
                .unwrap_or("");
            match kind {
                "function" | "class" | "module" | "method" | "bound" => format!("{kind} ({text})"),
                "built-in" => format!("builtin function ({text})"),
                _ => format!("object ({text})"),
            }
        }
        MontyNode::Function { name, .. } => format!("function ({name})"),
        // By its own type (`ValueError`, `KeyError`), not the generic "Exception".
        MontyNode::Exception { exc_type, arg } => match arg {
            Some(text) => format!("{exc_type} ({exc_type}({}))", py_str_repr(text, 100)),
            None => format!("{exc_type} ({exc_type}())"),
        },
        _ => value.r().type_name().to_string(),
    }
}

/// `text` as Python's `repr` writes a str (single quotes unless the text has one and no double
/// quote), cut to `max_chars` characters with `...` inside the quotes.
fn py_str_repr(text: &str, max_chars: usize) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len().min(max_chars) + 2);
    out.push(quote);
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push_str("...");
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']) {
        "an"
    } else {
        "a"
    }
}

fn unsupported_monty(value: V<'_>, root: &str, steps: &[Step]) -> ConvertError {
    ConvertError {
        type_name: monty_type_label(value),
        path: render_path(root, steps),
        too_deep: false,
    }
}

fn too_deep(root: &str, steps: &[Step]) -> ConvertError {
    ConvertError {
        type_name: String::new(),
        path: render_path(root, steps),
        too_deep: true,
    }
}

/// Whether a node may be a dict key or set element on the boundary (not a list, dict or set).
fn hashable_key(key: V<'_>) -> bool {
    !matches!(
        key.node(),
        MontyNode::List(_) | MontyNode::Dict(_) | MontyNode::Set(_)
    )
}

/// Whether a node is a container the walkers descend into.
fn is_container_node(n: &MontyNode) -> bool {
    matches!(
        n,
        MontyNode::List(_)
            | MontyNode::Tuple(_)
            | MontyNode::Dict(_)
            | MontyNode::Set(_)
            | MontyNode::FrozenSet(_)
    )
}

fn to_py<'py>(
    py: Python<'py>,
    value: V<'_>,
    root: &str,
    steps: &mut Vec<Step>,
    memo: &mut Memo<'py>,
) -> Result<Bound<'py, PyAny>, ConvertError> {
    if steps.len() > MAX_DEPTH {
        return Err(too_deep(root, steps));
    }
    let n = value.node();
    let is_container = is_container_node(n);
    let id = value.id.0;
    if is_container && let Some((obj, height)) = memo.built.get(&id) {
        if steps.len() + height <= MAX_DEPTH {
            return Ok(obj.clone());
        }
        // Too deep along this path: walk it again to name where.
        return check(value, root, steps, &mut Checked::default()).and(Err(too_deep(root, steps)));
    }
    if let Some(obj) = scalar_to_py(py, n) {
        return Ok(obj);
    }
    let mut height = 0usize;
    let obj = match n {
        MontyNode::List(ids) => {
            let list = PyList::empty(py);
            for (i, child) in ids.iter().enumerate() {
                steps.push(Step::Index(i));
                let v = to_py(py, value.child(*child), root, steps, memo)?;
                height = height.max(1 + memo_height(memo, *child));
                steps.pop();
                list.append(v).expect("list append cannot fail");
            }
            list.into_any()
        }
        MontyNode::Tuple(ids) => {
            let mut out = Vec::with_capacity(ids.len());
            for (i, child) in ids.iter().enumerate() {
                steps.push(Step::Index(i));
                out.push(to_py(py, value.child(*child), root, steps, memo)?);
                height = height.max(1 + memo_height(memo, *child));
                steps.pop();
            }
            PyTuple::new(py, out)
                .expect("tuple build cannot fail")
                .into_any()
        }
        MontyNode::Set(ids) | MontyNode::FrozenSet(ids) => {
            let mut out = Vec::with_capacity(ids.len());
            for (i, child) in ids.iter().enumerate() {
                steps.push(Step::Index(i));
                let c = value.child(*child);
                if !hashable_key(c) {
                    return Err(unsupported_monty(c, root, steps));
                }
                let item = to_py(py, c, root, steps, memo)?;
                height = height.max(1 + memo_height(memo, *child));
                if item.hash().is_err() {
                    return Err(unsupported_monty(c, root, steps));
                }
                steps.pop();
                out.push(item);
            }
            let built = if matches!(n, MontyNode::Set(_)) {
                PySet::new(py, out).map(Bound::into_any)
            } else {
                PyFrozenSet::new(py, out).map(Bound::into_any)
            };
            built.map_err(|_| unsupported_monty(value, root, steps))?
        }
        MontyNode::Dict(pairs) => {
            let dict = PyDict::new(py);
            for (k, v) in pairs {
                let k = value.child(*k);
                let vid = *v;
                let v = value.child(vid);
                steps.push(Step::Key(key_label(k)));
                if !hashable_key(k) {
                    return Err(unsupported_monty(k, root, steps));
                }
                let key = to_py(py, k, root, steps, memo)?;
                let val = to_py(py, v, root, steps, memo)?;
                height = height.max(1 + memo_height(memo, k.id).max(memo_height(memo, vid.0)));
                steps.pop();
                if dict.set_item(key, val).is_err() {
                    return Err(unsupported_monty(k, root, steps));
                }
            }
            dict.into_any()
        }
        _ => return Err(unsupported_monty(value, root, steps)),
    };
    if is_container {
        memo.built.insert(id, (obj.clone(), height));
    }
    Ok(obj)
}

/// The Python value of a scalar node; None for containers and values that cannot cross.
fn scalar_to_py<'py>(py: Python<'py>, n: &MontyNode) -> Option<Bound<'py, PyAny>> {
    Some(match n {
        MontyNode::None => py.None().into_bound(py),
        MontyNode::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        MontyNode::Int(i) => i
            .into_pyobject(py)
            .expect("int conversion is infallible")
            .into_any(),
        MontyNode::BigInt(b) => b
            .into_pyobject(py)
            .expect("bigint conversion is infallible")
            .into_any(),
        MontyNode::Float(f) => PyFloat::new(py, *f).into_any(),
        MontyNode::String(s) => PyString::new(py, s).into_any(),
        MontyNode::Bytes(b) => PyBytes::new(py, b).into_any(),
        _ => return None,
    })
}

fn memo_height(memo: &Memo<'_>, id: impl Into<NodeKey>) -> usize {
    memo.built.get(&id.into().0).map_or(0, |(_, h)| *h)
}

/// A node id as a plain key.
struct NodeKey(u32);

impl From<NodeId> for NodeKey {
    fn from(id: NodeId) -> Self {
        Self(id.0)
    }
}

impl From<u32> for NodeKey {
    fn from(id: u32) -> Self {
        Self(id)
    }
}

// ---------------------------------------------------------------- Python -> Monty

/// Converts a Python value to a Monty value; `root` names it in errors (e.g. `value`).
pub fn py_to_monty(value: &Bound<'_, PyAny>, root: &str) -> Result<MontyObject, ConvertError> {
    // Exact scalar types (the usual tool result) become a one-node value directly.
    if value.is_none() {
        return Ok(MontyObject::none());
    }
    if value.is_exact_instance_of::<PyInt>()
        && let Ok(i) = value.extract::<i64>()
    {
        return Ok(MontyObject::int(i));
    }
    if let Ok(s) = value.cast_exact::<PyString>()
        && let Ok(s) = s.to_str()
    {
        return Ok(MontyObject::string(s));
    }
    let mut steps = Vec::new();
    let mut graph = MontyGraph::new();
    let id = to_monty(value, root, &mut steps, &mut graph)?;
    Ok(unstable::object_from_graph(graph, id).expect("the root was just pushed"))
}

fn unsupported_py(value: &Bound<'_, PyAny>, root: &str, steps: &[Step]) -> ConvertError {
    let type_name = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_string());
    ConvertError {
        type_name,
        path: render_path(root, steps),
        too_deep: false,
    }
}

fn to_monty(
    value: &Bound<'_, PyAny>,
    root: &str,
    steps: &mut Vec<Step>,
    graph: &mut MontyGraph,
) -> Result<NodeId, ConvertError> {
    if steps.len() > MAX_DEPTH {
        return Err(too_deep(root, steps));
    }
    // Exact types first (the common, fast path); subclasses of the plain types are
    // accepted afterwards by their base behaviour. Children are pushed before their
    // container, as the arena requires.
    if value.is_none() {
        return Ok(graph.push(MontyNode::None));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| graph.push(MontyNode::String(s.to_owned())))
            .map_err(|_| ConvertError {
                type_name: "str with lone surrogates".to_string(),
                path: render_path(root, steps),
                too_deep: false,
            });
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(graph.push(MontyNode::Bool(b.is_true())));
    }
    if value.cast::<PyInt>().is_ok() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(graph.push(MontyNode::Int(i)));
        }
        return value
            .extract::<BigInt>()
            .map(|b| graph.push(MontyNode::BigInt(b)))
            .map_err(|_| unsupported_py(value, root, steps));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(graph.push(MontyNode::Float(f.value())));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(graph.push(MontyNode::Bytes(b.as_bytes().to_vec())));
    }
    if let Ok(list) = value.cast::<PyList>() {
        let mut out = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            steps.push(Step::Index(i));
            out.push(to_monty(&item, root, steps, graph)?);
            steps.pop();
        }
        return Ok(graph.push(MontyNode::List(out)));
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(tuple.len());
        for (i, item) in tuple.iter().enumerate() {
            steps.push(Step::Index(i));
            out.push(to_monty(&item, root, steps, graph)?);
            steps.pop();
        }
        return Ok(graph.push(MontyNode::Tuple(out)));
    }
    let set_items = if let Ok(set) = value.cast::<PySet>() {
        Some((set.iter().collect::<Vec<_>>(), true))
    } else if let Ok(set) = value.cast::<PyFrozenSet>() {
        Some((set.iter().collect::<Vec<_>>(), false))
    } else {
        None
    };
    if let Some((items, mutable)) = set_items {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            steps.push(Step::Index(i));
            out.push(to_monty(item, root, steps, graph)?);
            steps.pop();
        }
        return Ok(graph.push(if mutable {
            MontyNode::Set(out)
        } else {
            MontyNode::FrozenSet(out)
        }));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut pairs = Vec::with_capacity(dict.len());
        for (k, v) in dict.iter() {
            let label = k
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_else(|_| "?".to_string());
            steps.push(Step::Key(label));
            if k.cast::<PyList>().is_ok() || k.cast::<PyDict>().is_ok() || k.cast::<PySet>().is_ok()
            {
                return Err(unsupported_py(&k, root, steps));
            }
            let key = to_monty(&k, root, steps, graph)?;
            let val = to_monty(&v, root, steps, graph)?;
            steps.pop();
            pairs.push((key, val));
        }
        return Ok(graph.push(MontyNode::Dict(pairs)));
    }
    Err(unsupported_py(value, root, steps))
}

// ---------------------------------------------------------------- plain-data check

/// Container nodes already checked, with the depth budget left when they were.
#[derive(Default)]
struct Checked {
    budget: std::collections::HashMap<u32, usize>,
}

/// Checks, without the GIL, that a Monty value is plain data that will convert.
pub fn check_plain(value: &MontyObject, root: &str) -> Result<(), ConvertError> {
    check_ref(V::of(value), root)
}

/// [`check_plain`] for a borrowed value (e.g. one call argument).
pub fn check_ref(value: V<'_>, root: &str) -> Result<(), ConvertError> {
    let mut steps = Vec::new();
    check(value, root, &mut steps, &mut Checked::default())
}

fn check(
    value: V<'_>,
    root: &str,
    steps: &mut Vec<Step>,
    seen: &mut Checked,
) -> Result<(), ConvertError> {
    if steps.len() > MAX_DEPTH {
        return Err(too_deep(root, steps));
    }
    let n = value.node();
    if is_container_node(n) {
        // A shared node checked with at least this much depth left is fine again.
        let left = MAX_DEPTH - steps.len();
        let id = value.id.0;
        if seen.budget.get(&id).is_some_and(|b| *b >= left) {
            return Ok(());
        }
        seen.budget.insert(id, left);
    }
    match n {
        MontyNode::None
        | MontyNode::Bool(_)
        | MontyNode::Int(_)
        | MontyNode::BigInt(_)
        | MontyNode::Float(_)
        | MontyNode::String(_)
        | MontyNode::Bytes(_) => Ok(()),
        MontyNode::List(ids) | MontyNode::Tuple(ids) => {
            for (i, child) in ids.iter().enumerate() {
                steps.push(Step::Index(i));
                check(value.child(*child), root, steps, seen)?;
                steps.pop();
            }
            Ok(())
        }
        MontyNode::Set(ids) | MontyNode::FrozenSet(ids) => {
            for (i, child) in ids.iter().enumerate() {
                steps.push(Step::Index(i));
                let c = value.child(*child);
                if !hashable_key(c) {
                    return Err(unsupported_monty(c, root, steps));
                }
                check(c, root, steps, seen)?;
                steps.pop();
            }
            Ok(())
        }
        MontyNode::Dict(pairs) => {
            for (k, v) in pairs {
                let k = value.child(*k);
                steps.push(Step::Key(key_label(k)));
                if !hashable_key(k) {
                    return Err(unsupported_monty(k, root, steps));
                }
                check(k, root, steps, seen)?;
                check(value.child(*v), root, steps, seen)?;
                steps.pop();
            }
            Ok(())
        }
        _ => Err(unsupported_monty(value, root, steps)),
    }
}
