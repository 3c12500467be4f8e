//! A tool call as the script made it, checked: which tool, which arguments (arena ids), and
//! the names a script may call (`call_tool`, a tool function, or a `NameError`).

use crate::convert::{V, check_ref};
use crate::engine::interp::unstable::{self, NodeId};
use crate::engine::interp::{
    CallArgs, ExcType, FunctionCall, MontyException, MontyObject, NameLookupResult,
};

use super::ToolStyle;

/// The tool call a paused script is waiting on, already checked. Arguments stay in the
/// paused call's arena ([`Paused::args`]); they are converted when Python reads them.
/// A `call_tool` request points into the arena for its name and its arguments too, so
/// classifying it allocates nothing (issue 21: the name and key strings and the list of
/// pairs were three allocations and three frees per round trip).
pub struct ToolRequest {
    pub name: ToolName,
    /// Arena ids of the positional arguments (`Functions` style only).
    pub positional: Vec<NodeId>,
    /// The keyword arguments (or the `call_tool` dict's items).
    pub keyword: Keywords,
    pub call_id: u32,
}

/// A requested tool's name.
pub enum ToolName {
    /// A string node of the call's arena (`call_tool`'s first argument).
    At(NodeId),
    /// The called name (`Functions` style), or a name read back from snapshot bytes.
    Named(String),
}

/// A request's keyword arguments.
pub enum Keywords {
    /// The items of a dict node of the call's arena (`call_tool`'s second argument), whose
    /// keys were checked to be strings.
    Dict(NodeId),
    /// Names and arena ids (`Functions` style keyword arguments, snapshot bytes; empty for a
    /// `call_tool` call without a dict).
    Listed(Vec<(String, NodeId)>),
}

impl ToolRequest {
    /// The tool's name; `graph` is the arena of the call's arguments.
    pub fn name<'a>(&'a self, graph: &'a unstable::MontyGraph) -> &'a str {
        match &self.name {
            ToolName::At(id) => graph.value(*id).as_str().unwrap_or_default(),
            ToolName::Named(name) => name,
        }
    }

    /// Calls `f` with each keyword argument's name and arena id, in the script's order,
    /// until it fails.
    pub fn try_keywords<'a, E>(
        &'a self,
        graph: &'a unstable::MontyGraph,
        mut f: impl FnMut(&'a str, NodeId) -> Result<(), E>,
    ) -> Result<(), E> {
        match &self.keyword {
            Keywords::Dict(id) => {
                if let unstable::MontyNode::Dict(pairs) = graph.node(*id) {
                    for (k, v) in pairs {
                        f(graph.value(*k).as_str().unwrap_or_default(), *v)?;
                    }
                }
                Ok(())
            }
            Keywords::Listed(items) => items.iter().try_for_each(|(k, v)| f(k, *v)),
        }
    }

    /// The keyword arguments as names and arena ids (snapshot bytes keep them so).
    pub fn keyword_list(&self, graph: &unstable::MontyGraph) -> Vec<(String, NodeId)> {
        let mut items = Vec::new();
        let _ = self.try_keywords(graph, |k, v| {
            items.push((k.to_owned(), v));
            Ok::<(), ()>(())
        });
        items
    }
}

fn type_error(msg: String) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(msg))
}

/// Unwraps and checks a call; an `Err` is the exception to raise into the script.
pub(super) fn classify(
    style: ToolStyle,
    call: &FunctionCall,
) -> Result<ToolRequest, MontyException> {
    classify_parts(
        style,
        &call.function_name,
        &call.args,
        call.call_id,
        call.object_id.is_none(),
    )
}

/// [`classify`] on a call's parts (a script's or a session feed's call).
pub(crate) fn classify_parts(
    style: ToolStyle,
    function_name: &str,
    args: &CallArgs,
    call_id: u32,
    plain_function: bool,
) -> Result<ToolRequest, MontyException> {
    let (graph, arg_ids, kwarg_ids) = unstable::call_args_parts(args);
    if function_name != "call_tool" {
        if style == ToolStyle::Functions && plain_function {
            let mut keyword = Vec::with_capacity(kwarg_ids.len());
            for (k, v) in kwarg_ids {
                let Some(k) = graph.value(*k).as_str() else {
                    return Err(type_error("keyword argument names must be strings".into()));
                };
                keyword.push((k.to_owned(), *v));
            }
            let req = ToolRequest {
                name: ToolName::Named(function_name.to_owned()),
                positional: arg_ids.to_vec(),
                keyword: Keywords::Listed(keyword),
                call_id,
            };
            check_request(graph, &req)?;
            return Ok(req);
        }
        return Err(undefined_name(function_name));
    }
    let (name_id, name) = match arg_ids.first().map(|id| (*id, graph.value(*id).as_str())) {
        Some((id, Some(s))) => (id, s),
        _ => {
            return Err(type_error(
                "call_tool needs the tool name as its first argument, a string: \
                 call_tool(\"search\", {\"query\": \"...\"})"
                    .into(),
            ));
        }
    };
    if !kwarg_ids.is_empty() {
        return Err(type_error(format!(
            "call_tool takes the tool's arguments in one dict, not as keyword arguments: \
             call_tool(\"{name}\", {{\"arg\": value}})"
        )));
    }
    if arg_ids.len() > 2 {
        return Err(type_error(format!(
            "call_tool takes exactly two arguments, the tool name and one dict of arguments: \
             call_tool(\"{name}\", {{\"arg\": value}})"
        )));
    }
    let mut keyword = Keywords::Listed(Vec::new());
    if let Some(id) = arg_ids.get(1) {
        let arg = graph.value(*id);
        match graph.node(*id) {
            unstable::MontyNode::Dict(pairs) => {
                for (k, _) in pairs {
                    let key = graph.value(*k);
                    if key.as_str().is_none() {
                        return Err(type_error(format!(
                            "call_tool argument names must be strings, got the {} key {}: \
                             call_tool(\"{name}\", {{\"arg\": value}})",
                            key.type_name(),
                            key.py_repr()
                        )));
                    }
                }
                keyword = Keywords::Dict(*id);
            }
            _ => {
                return Err(type_error(format!(
                    "call_tool's second argument must be a dict of the tool's arguments, got {}: \
                     call_tool(\"{name}\", {{\"arg\": value}})",
                    arg.type_name()
                )));
            }
        }
    }
    let req = ToolRequest {
        name: ToolName::At(name_id),
        positional: Vec::new(),
        keyword,
        call_id,
    };
    check_request(graph, &req)?;
    Ok(req)
}

pub(super) fn check_request(
    graph: &unstable::MontyGraph,
    req: &ToolRequest,
) -> Result<(), MontyException> {
    for (i, v) in req.positional.iter().enumerate() {
        if is_scalar(graph, *v) {
            continue;
        }
        check_ref(V::at(graph, *v), &format!("argument {i}")).map_err(|e| {
            type_error(format!(
                "tool '{}' got a value it cannot take: {}",
                req.name(graph),
                e.describe()
            ))
        })?;
    }
    req.try_keywords(graph, |k, v| {
        if is_scalar(graph, v) {
            return Ok(());
        }
        check_ref(V::at(graph, v), &format!("argument '{k}'")).map_err(|e| {
            type_error(format!(
                "tool '{}' got a value it cannot take: {}",
                req.name(graph),
                e.describe()
            ))
        })
    })
}

/// Whether a node is a plain scalar (always crosses the boundary; nothing to check).
fn is_scalar(graph: &unstable::MontyGraph, id: NodeId) -> bool {
    matches!(
        graph.node(id),
        unstable::MontyNode::None
            | unstable::MontyNode::Bool(_)
            | unstable::MontyNode::Int(_)
            | unstable::MontyNode::BigInt(_)
            | unstable::MontyNode::Float(_)
            | unstable::MontyNode::String(_)
            | unstable::MontyNode::Bytes(_)
    )
}

/// CPython's builtin names (3.13): a lookup of one of these that Monty does not define is a
/// missing builtin, never a tool call.
const PYTHON_BUILTINS: &[&str] = &[
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BaseExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "BufferError",
    "BytesWarning",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "DeprecationWarning",
    "EOFError",
    "Ellipsis",
    "EncodingWarning",
    "EnvironmentError",
    "Exception",
    "ExceptionGroup",
    "False",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "InterruptedError",
    "IsADirectoryError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "None",
    "NotADirectoryError",
    "NotImplemented",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "PermissionError",
    "ProcessLookupError",
    "RecursionError",
    "ReferenceError",
    "ResourceWarning",
    "RuntimeError",
    "RuntimeWarning",
    "StopAsyncIteration",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "SystemExit",
    "TabError",
    "TimeoutError",
    "True",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
    "__build_class__",
    "__debug__",
    "__doc__",
    "__file__",
    "__import__",
    "__name__",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
];

/// How the script's undefined names resolve: `call_tool` (and, in the functions style,
/// any other name that is not a Python builtin) is a host function whose calls pause the
/// script; other names raise `NameError`, with the tool hint only for names that look
/// like tool calls (not a builtin, not `final_answer`).
pub(crate) fn name_answer(style: ToolStyle, name: &str, called: bool) -> NameLookupResult {
    let builtin = PYTHON_BUILTINS.binary_search(&name).is_ok();
    if called && (name == "call_tool" || (style == ToolStyle::Functions && !builtin)) {
        return NameLookupResult::Value(MontyObject::function(name, None));
    }
    if builtin || name == "final_answer" || !called {
        return NameLookupResult::Undefined;
    }
    NameLookupResult::Error(undefined_name(name))
}

/// The `NameError` for a called name the host does not serve: with the tool hint unless
/// the name is a Python builtin or `final_answer`.
fn undefined_name(name: &str) -> MontyException {
    if PYTHON_BUILTINS.binary_search(&name).is_ok() || name == "final_answer" {
        return MontyException::new(
            ExcType::NameError,
            Some(format!("name '{name}' is not defined")),
        );
    }
    MontyException::new(
        ExcType::NameError,
        Some(format!(
            "name '{name}' is not defined. Tools are not Python functions here: call them only as \
             call_tool(\"<tool-name>\", {{\"arg\": value}})"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_is_sorted_for_binary_search() {
        assert!(PYTHON_BUILTINS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn only_tool_like_names_get_the_tool_hint() {
        for name in ["object", "dir", "final_answer", "print"] {
            assert!(matches!(
                name_answer(ToolStyle::CallTool, name, true),
                NameLookupResult::Undefined
            ));
        }
        assert!(matches!(
            name_answer(ToolStyle::CallTool, "search_web", true),
            NameLookupResult::Error(_)
        ));
        assert!(matches!(
            name_answer(ToolStyle::CallTool, "call_tool", true),
            NameLookupResult::Value(_)
        ));
        assert!(matches!(
            name_answer(ToolStyle::Functions, "search_web", true),
            NameLookupResult::Value(_)
        ));
        assert!(matches!(
            name_answer(ToolStyle::CallTool, "call_tool", false),
            NameLookupResult::Undefined
        ));
        assert!(matches!(
            name_answer(ToolStyle::Functions, "dir", true),
            NameLookupResult::Undefined
        ));
    }
}
