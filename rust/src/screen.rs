//! The native screen in front of the static subset check (`codeact.runtime._check`).
//!
//! The subset check parses a script with CPython's `ast` and walks it several ways; on a
//! 10 KB script that costs about ten times what Monty needs to start it. Most scripts
//! contain nothing any of its rules looks at, so this screen parses the script once with
//! the parser Monty itself uses (ruff's, in Rust) and answers one question: could any rule
//! of the check (a finding or a same-meaning rewrite) apply? Only when it could does the
//! Python check run; its answer is then the one that counts.
//!
//! The screen over-approximates: every condition below is implied by (weaker than) the
//! condition of a rule in `_check.py`, so a script the screen passes has no finding and no
//! rewrite. The name tables come from Python (the same tables the rules read), so a name
//! added there reaches the screen without a change here. `tests/test_subset_screen.py`
//! holds the screen to that on every script the check's own tests and the corpora use.

use pyo3::prelude::*;
use ruff_python_ast::{
    self as ast, Expr, Stmt,
    visitor::{Visitor, walk_expr, walk_stmt},
};

use rustc_hash::FxHashSet as HashSet;

use crate::stack::with_stack;

/// Stack, in bytes, reserved per byte of source when the source is not scanned first: the
/// parser and the walk grow their stack on demand, but dropping the syntax tree recurses once
/// per nesting level (a few small frames), and a level costs at least one byte of source.
const STACK_PER_BYTE: usize = 128;
/// Stack, in bytes, on top of that (and all a source within Monty's nesting bound needs).
const STACK_BASE: usize = 1024 * 1024;
/// `stacker::maybe_grow` red zone and segment size for the walk.
const RED_ZONE: usize = 64 * 1024;
const SEGMENT: usize = 1024 * 1024;

/// The callers whose `key=` argument Monty calls back (`_check._callable_slots`).
const KEY_CALLERS: [&str; 4] = ["sorted", "min", "max", "sort"];

/// Whether a script needs the full subset check; built once from the check's name tables.
#[pyclass(frozen, module = "codeact._monty")]
pub struct SubsetScreen {
    /// Builtins Monty lacks: a call of one is reported.
    missing_builtins: HashSet<String>,
    /// Builtin exception classes: a call with odd arguments is reported.
    exception_names: HashSet<String>,
    /// Method names reported when read as a value (`f = d.get`).
    method_names: HashSet<String>,
    /// Attribute names of module members Monty lacks (`collections.OrderedDict`, ...).
    gap_attributes: HashSet<String>,
    /// Method names whose call is reported whatever the arguments (`format_map`, `utcnow`).
    call_attributes: HashSet<String>,
    /// Modules a script may import.
    allowed_modules: HashSet<String>,
    /// `(module, name)` pairs missing from allowed modules.
    gap_imports: HashSet<(String, String)>,
}

#[pymethods]
impl SubsetScreen {
    #[new]
    fn new(
        missing_builtins: Vec<String>,
        exception_names: Vec<String>,
        method_names: Vec<String>,
        gap_attributes: Vec<String>,
        call_attributes: Vec<String>,
        allowed_modules: Vec<String>,
        gap_imports: Vec<(String, String)>,
    ) -> Self {
        Self {
            missing_builtins: missing_builtins.into_iter().collect(),
            exception_names: exception_names.into_iter().collect(),
            method_names: method_names.into_iter().collect(),
            gap_attributes: gap_attributes.into_iter().collect(),
            call_attributes: call_attributes.into_iter().collect(),
            allowed_modules: allowed_modules.into_iter().collect(),
            gap_imports: gap_imports.into_iter().collect(),
        }
    }

    /// Whether any rule of the subset check could apply to `script` (True also when the
    /// screen cannot tell: a parse error, a source nested past Monty's bound). Releases the
    /// GIL while it parses.
    fn needs_check(&self, py: Python<'_>, script: &str) -> bool {
        py.detach(|| {
            let unscanned = STACK_BASE.saturating_add(script.len().saturating_mul(STACK_PER_BYTE));
            if stacker::remaining_stack().is_some_and(|left| left >= unscanned) {
                return self.screen(script);
            }
            // Too little stack to take the source's length as its depth: Monty's nesting
            // pre-scan (one lexer pass) bounds the depth instead.
            if !monty::source_within_nesting_bound(script, 0) {
                return true;
            }
            with_stack(STACK_BASE, || self.screen(script))
        })
    }
}

impl SubsetScreen {
    fn screen(&self, script: &str) -> bool {
        let Ok(parsed) = ruff_python_parser::parse_module(script) else {
            return true;
        };
        let mut walk = Walk {
            screen: self,
            hit: false,
            defs: HashSet::default(),
            slot_names: Vec::new(),
        };
        for stmt in &parsed.syntax().body {
            walk.visit_stmt(stmt);
            if walk.hit {
                return true;
            }
        }
        walk.slot_names.iter().any(|n| walk.defs.contains(n))
    }
}

struct Walk<'s, 'a> {
    screen: &'s SubsetScreen,
    hit: bool,
    /// Names of the script's functions (`_check._tool_functions` only ever names those).
    defs: HashSet<&'a str>,
    /// Names passed where a callback goes (`sorted(key=f)`, `map(f, ...)`).
    slot_names: Vec<&'a str>,
}

fn keyword_named(arguments: &ast::Arguments, names: &[&str]) -> bool {
    arguments
        .keywords
        .iter()
        .any(|k| k.arg.as_ref().is_some_and(|a| names.contains(&a.as_str())))
}

fn contains_call(expr: &Expr) -> bool {
    struct Finder(bool);
    impl<'a> Visitor<'a> for Finder {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if matches!(expr, Expr::Call(_)) {
                self.0 = true;
            } else if !self.0 {
                stacker::maybe_grow(RED_ZONE, SEGMENT, || walk_expr(self, expr));
            }
        }
    }
    let mut finder = Finder(false);
    finder.visit_expr(expr);
    finder.0
}

fn non_string_literal(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::BytesLiteral(_)
            | Expr::EllipsisLiteral(_)
    )
}

impl<'a> Walk<'_, 'a> {
    fn import_root<'n>(name: &'n str) -> &'n str {
        name.split('.').next().unwrap_or(name)
    }

    fn stmt_hits(&mut self, stmt: &'a Stmt) -> bool {
        let s = self.screen;
        match stmt {
            Stmt::FunctionDef(def) => {
                self.defs.insert(def.name.as_str());
                !def.decorator_list.is_empty()
            }
            Stmt::ClassDef(class) => {
                !class.decorator_list.is_empty()
                    || class
                        .arguments
                        .as_ref()
                        .is_some_and(|a| !a.args.is_empty() || !a.keywords.is_empty())
            }
            Stmt::Delete(_) => true,
            Stmt::Import(import) => import.names.iter().any(|a| {
                !s.allowed_modules
                    .contains(Self::import_root(a.name.as_str()))
            }),
            Stmt::ImportFrom(import) => {
                let Some(module) = import.module.as_ref() else {
                    return true;
                };
                let root = Self::import_root(module.as_str());
                // asyncio: `gather` under another name; json: `dumps` under another name.
                import.level > 0
                    || !s.allowed_modules.contains(root)
                    || root == "asyncio"
                    || root == "json"
                    || import.names.iter().any(|a| {
                        a.name.as_str() == "*"
                            || s.gap_imports
                                .contains(&(root.to_owned(), a.name.as_str().to_owned()))
                    })
            }
            Stmt::Assign(assign) => matches!(
                assign.value.as_ref(),
                Expr::Attribute(attr) if s.method_names.contains(attr.attr.as_str())
            ),
            _ => false,
        }
    }

    fn call_hits(&mut self, call: &'a ast::ExprCall) -> bool {
        let s = self.screen;
        let arguments = &call.arguments;
        let name = match call.func.as_ref() {
            Expr::Name(n) => {
                let id = n.id.as_str();
                if s.missing_builtins.contains(id) {
                    return true;
                }
                if id == "next"
                    && arguments
                        .args
                        .iter()
                        .any(|a| matches!(a, Expr::Generator(_)))
                {
                    return true;
                }
                if (id == "dumps" || id == "dump") && keyword_named(arguments, &["default", "cls"])
                {
                    return true;
                }
                if s.exception_names.contains(id)
                    && (arguments.args.len() >= 2
                        || arguments.args.first().is_some_and(non_string_literal))
                {
                    return true;
                }
                if (id == "map" || id == "filter")
                    && !arguments.args.is_empty()
                    && self.slot_hits(&arguments.args[0])
                {
                    return true;
                }
                id
            }
            Expr::Attribute(a) => {
                let attr = a.attr.as_str();
                if s.call_attributes.contains(attr) {
                    return true;
                }
                let hit = match attr {
                    "dumps" | "dump" => keyword_named(arguments, &["default", "cls"]),
                    "read_text" | "write_text" => keyword_named(arguments, &["encoding", "errors"]),
                    "gather" => !arguments.keywords.is_empty(),
                    "sub" => arguments.args.len() >= 2,
                    _ => false,
                };
                if hit {
                    return true;
                }
                attr
            }
            _ => return false,
        };
        if KEY_CALLERS.contains(&name) {
            for k in arguments.keywords.iter() {
                if k.arg.as_ref().is_some_and(|a| a.as_str() == "key") && self.slot_hits(&k.value) {
                    return true;
                }
            }
        }
        false
    }

    /// A callback argument: a bound method, a lambda that calls something, or a name that
    /// may be one of the script's functions (decided once every def is known).
    fn slot_hits(&mut self, slot: &'a Expr) -> bool {
        match slot {
            Expr::Attribute(_) => true,
            Expr::Lambda(lambda) => contains_call(&lambda.body),
            Expr::Name(n) => {
                self.slot_names.push(n.id.as_str());
                false
            }
            _ => false,
        }
    }
}

impl<'a> Visitor<'a> for Walk<'_, 'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.hit {
            return;
        }
        if self.stmt_hits(stmt) {
            self.hit = true;
            return;
        }
        stacker::maybe_grow(RED_ZONE, SEGMENT, || walk_stmt(self, stmt));
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.hit {
            return;
        }
        let hit = match expr {
            Expr::Await(_) => true,
            Expr::Call(call) => self.call_hits(call),
            Expr::Attribute(attr) => {
                matches!(attr.value.as_ref(), Expr::Name(_))
                    && self.screen.gap_attributes.contains(attr.attr.as_str())
            }
            _ => false,
        };
        if hit {
            self.hit = true;
            return;
        }
        stacker::maybe_grow(RED_ZONE, SEGMENT, || walk_expr(self, expr));
    }
}
