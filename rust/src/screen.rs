//! The native screen in front of the static subset check (`codeact.runtime._check`).
//!
//! The subset check parses a script with CPython's `ast` and walks it several ways; on a
//! 10 KB script that costs several times what Monty needs to start it. Most scripts contain
//! nothing any of its rules looks at, so this screen answers one question first, natively:
//! could any rule of the check (a finding or a same-meaning rewrite) apply, or is a call
//! awaited? Only then does the Python check run; its answer is the one that counts.
//!
//! Two gates, both over-approximations (each condition is implied by the condition of a
//! rule in `_check.py`, so a script either gate passes has no finding and no rewrite):
//! one pass of the lexer Monty's parser uses (ruff's), about a fifth of a parse, with each
//! trigger in a token-level form; and only for a script the tokens do not clear, one parse
//! and a walk of the syntax tree with the trigger in a tree-level form. The name tables
//! come from Python (the tables the rules read), so a name added there reaches the screen
//! without a change here. `tests/test_subset_screen.py` holds each gate to that on every
//! script the check's own tests, Monty's test cases and the shared corpus use.

use pyo3::prelude::*;
use ruff_python_ast::{
    self as ast, Expr, Stmt,
    token::TokenKind,
    visitor::{Visitor, walk_expr, walk_stmt},
};
use ruff_python_parser::{Mode, lexer::lex};
use ruff_text_size::TextRange;

use rustc_hash::FxHashSet as HashSet;

use crate::engine::interp;
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
        py.detach(|| self.tokens_need_check(script) && self.tree_needs_check_here(script))
    }

    /// The first gate of `needs_check` alone: one lexer pass, no parse (for tests).
    fn tokens_may_need_check(&self, py: Python<'_>, script: &str) -> bool {
        py.detach(|| self.tokens_need_check(script))
    }

    /// The second gate of `needs_check` alone: the parse and the walk (for tests).
    fn tree_needs_check(&self, py: Python<'_>, script: &str) -> bool {
        py.detach(|| self.tree_needs_check_here(script))
    }
}

/// Whether `script` parses as a Python module with the parser Monty uses (ruff's), the
/// GIL released. The agent's code extraction asks this of every block it reads (is a closer
/// line inside a string, is a bare block Python); CPython's `ast.parse`, which builds a
/// Python object per node, cost about 6 µs per line of script there. On a thread whose
/// stack is too short to take the source's length as its depth, a source nested past
/// Monty's bound (which Monty refuses to run) reads as not parsing, and any other is parsed
/// on a separate stack segment, as the screen does.
#[pyfunction]
pub fn parses(py: Python<'_>, script: &str) -> bool {
    py.detach(|| {
        with_source_stack(script, false, || {
            ruff_python_parser::parse_module(script).is_ok()
        })
    })
}

/// `f()`, which parses or walks `script`, with the stack that needs: on this thread when
/// its stack can take the source's length as its depth; else, when Monty's nesting pre-scan
/// (one lexer pass) finds the source within its bound, on a separate segment; else
/// `too_deep` without running `f`.
fn with_source_stack<R>(script: &str, too_deep: R, f: impl FnOnce() -> R) -> R {
    let unscanned = STACK_BASE.saturating_add(script.len().saturating_mul(STACK_PER_BYTE));
    if stacker::remaining_stack().is_some_and(|left| left >= unscanned) {
        return f();
    }
    if !interp::source_within_nesting_bound(script, 0) {
        return too_deep;
    }
    with_stack(STACK_BASE, f)
}

impl SubsetScreen {
    fn tree_needs_check_here(&self, script: &str) -> bool {
        with_source_stack(script, true, || self.screen(script))
    }

    /// The first gate: one lexer pass (about a fifth of a parse). Each rule's trigger in a
    /// still weaker, token-level form; true also on a lexical error.
    fn tokens_need_check(&self, script: &str) -> bool {
        let mut lexer = lex(script, Mode::Module);
        let mut tokens: Vec<(TokenKind, TextRange)> = Vec::with_capacity(script.len() / 4);
        loop {
            match lexer.next_token() {
                TokenKind::EndOfFile => break,
                TokenKind::Comment | TokenKind::NonLogicalNewline => {}
                TokenKind::Unknown | TokenKind::IpyEscapeCommand => return true,
                kind => tokens.push((kind, lexer.current_range())),
            }
        }
        Tokens {
            screen: self,
            script,
            tokens: &tokens,
        }
        .need_check()
    }

    fn screen(&self, script: &str) -> bool {
        let Ok(parsed) = ruff_python_parser::parse_module(script) else {
            return true;
        };
        let mut walk = Walk {
            screen: self,
            hit: false,
            defs: HashSet::default(),
            slot_names: Vec::new(),
            modules: HashSet::default(),
            gap_owners: Vec::new(),
        };
        for stmt in &parsed.syntax().body {
            walk.visit_stmt(stmt);
            if walk.hit {
                return true;
            }
        }
        walk.slot_names.iter().any(|n| walk.defs.contains(n))
            || walk
                .gap_owners
                .iter()
                .any(|n| *n == "str" || walk.modules.contains(n))
    }
}

/// The token-level gate over one script's significant tokens (comments and the newlines
/// inside brackets left out).
struct Tokens<'s, 'a> {
    screen: &'s SubsetScreen,
    script: &'a str,
    tokens: &'a [(TokenKind, TextRange)],
}

impl<'a> Tokens<'_, 'a> {
    fn kind(&self, i: usize) -> Option<TokenKind> {
        self.tokens.get(i).map(|t| t.0)
    }

    fn text(&self, i: usize) -> &'a str {
        &self.script[self.tokens[i].1]
    }

    /// Whether token `i` begins a statement (an `import` / `from` there is an import).
    fn statement_start(&self, i: usize) -> bool {
        i == 0
            || matches!(
                self.kind(i - 1),
                Some(
                    TokenKind::Newline
                        | TokenKind::Indent
                        | TokenKind::Dedent
                        | TokenKind::Semi
                        | TokenKind::Colon
                )
            )
    }

    fn need_check(&self) -> bool {
        let s = self.screen;
        let mut defs: HashSet<&str> = HashSet::default();
        let mut modules: HashSet<&str> = HashSet::default();
        let mut slot_names: Vec<&str> = Vec::new();
        let mut gap_owners: Vec<&str> = Vec::new();
        // The open brackets, innermost last: a `for` whose innermost bracket is `(` belongs
        // to a generator expression (whose calls the check may rewrite into a loop).
        let mut brackets: Vec<TokenKind> = Vec::new();
        for i in 0..self.tokens.len() {
            match self.tokens[i].0 {
                // decorators (and `@` as an operator), `del`, `await`
                TokenKind::At | TokenKind::Del | TokenKind::Await => return true,
                kind @ (TokenKind::Lpar | TokenKind::Lsqb | TokenKind::Lbrace) => {
                    brackets.push(kind)
                }
                TokenKind::Rpar | TokenKind::Rsqb | TokenKind::Rbrace => {
                    brackets.pop();
                }
                TokenKind::For if brackets.last() == Some(&TokenKind::Lpar) => return true,
                // a class with bases or keywords (`class A:` and `class A():` have none)
                TokenKind::Class => match (self.kind(i + 2), self.kind(i + 3)) {
                    (Some(TokenKind::Colon), _)
                    | (Some(TokenKind::Lpar), Some(TokenKind::Rpar)) => {}
                    _ => return true,
                },
                TokenKind::Def => {
                    if self.kind(i + 1) == Some(TokenKind::Name) {
                        defs.insert(self.text(i + 1));
                    }
                }
                TokenKind::Import | TokenKind::From if self.statement_start(i) => {
                    if self.import_needs_check(i, &mut modules) {
                        return true;
                    }
                }
                TokenKind::Name => {
                    let name = self.text(i);
                    let next = self.kind(i + 1);
                    let after_dot = i > 0 && self.kind(i - 1) == Some(TokenKind::Dot);
                    if name == "gather" // its keywords, under any alias
                        || (matches!(name, "default" | "cls" | "encoding" | "errors") && next == Some(TokenKind::Equal))
                    {
                        return true; // json's default= / cls=; read_text(encoding=)
                    }
                    if after_dot {
                        if s.call_attributes.contains(name) || name == "sub" {
                            return true;
                        }
                        // `x = obj.method` (also in parentheses)
                        if s.method_names.contains(name)
                            && matches!(
                                next,
                                None | Some(TokenKind::Newline | TokenKind::Semi | TokenKind::Rpar)
                            )
                        {
                            return true;
                        }
                        if s.gap_attributes.contains(name) {
                            match self.kind(i - 2) {
                                Some(TokenKind::Name) => gap_owners.push(self.text(i - 2)),
                                Some(TokenKind::Rpar) => return true, // `(module).name`
                                _ => {}
                            }
                        }
                        continue;
                    }
                    if s.missing_builtins.contains(name) || name == "next" {
                        return true;
                    }
                    let parenthesized = i > 0
                        && self.kind(i - 1) == Some(TokenKind::Lpar)
                        && next == Some(TokenKind::Rpar);
                    if s.exception_names.contains(name)
                        && (parenthesized
                            || (next == Some(TokenKind::Lpar) && self.odd_exception_args(i + 2)))
                    {
                        return true;
                    }
                    if name == "key"
                        && next == Some(TokenKind::Equal)
                        && self.slot_needs_check(i + 2, &mut slot_names)
                    {
                        return true;
                    }
                    if matches!(name, "map" | "filter")
                        && (parenthesized
                            || (next == Some(TokenKind::Lpar)
                                && self.slot_needs_check(i + 2, &mut slot_names)))
                    {
                        return true;
                    }
                }
                _ => {}
            }
        }
        slot_names.iter().any(|n| defs.contains(n))
            || gap_owners
                .iter()
                .any(|n| *n == "str" || modules.contains(n))
    }

    /// An import statement at token `i`: true when a rule could report or rewrite it. Records
    /// the names `import` binds (module aliases).
    fn import_needs_check(&self, i: usize, modules: &mut HashSet<&'a str>) -> bool {
        let s = self.screen;
        let end = (i..self.tokens.len())
            .find(|&j| matches!(self.kind(j), Some(TokenKind::Newline | TokenKind::Semi)))
            .unwrap_or(self.tokens.len());
        let statement = &self.tokens[i..end];
        let name_at = |j: usize| {
            (statement.get(j).map(|t| t.0) == Some(TokenKind::Name)).then(|| self.text(i + j))
        };
        if statement[0].0 == TokenKind::Import {
            // import a.b [as c], d ...
            let mut j = 1;
            loop {
                let Some(root) = name_at(j) else { return true };
                if !s.allowed_modules.contains(root) {
                    return true;
                }
                j += 1;
                while statement.get(j).map(|t| t.0) == Some(TokenKind::Dot)
                    && name_at(j + 1).is_some()
                {
                    j += 2;
                }
                let mut bound = root;
                if statement.get(j).map(|t| t.0) == Some(TokenKind::As) {
                    let Some(alias) = name_at(j + 1) else {
                        return true;
                    };
                    bound = alias;
                    j += 2;
                }
                modules.insert(bound);
                match statement.get(j).map(|t| t.0) {
                    None => return false,
                    Some(TokenKind::Comma) => j += 1,
                    Some(_) => return true,
                }
            }
        }
        // from a.b import x [as y], ... (relative imports and anything unexpected: true)
        let Some(root) = name_at(1) else { return true };
        if !s.allowed_modules.contains(root) || root == "asyncio" || root == "json" {
            return true;
        }
        let mut j = 2;
        while statement.get(j).map(|t| t.0) == Some(TokenKind::Dot) && name_at(j + 1).is_some() {
            j += 2;
        }
        if statement.get(j).map(|t| t.0) != Some(TokenKind::Import) {
            return true;
        }
        for (k, token) in statement.iter().enumerate().skip(j + 1) {
            match token.0 {
                TokenKind::Name => {
                    let after_as = statement[k - 1].0 == TokenKind::As;
                    if !after_as
                        && s.gap_imports
                            .contains(&(root.to_owned(), self.text(i + k).to_owned()))
                    {
                        return true;
                    }
                }
                TokenKind::As | TokenKind::Comma | TokenKind::Lpar | TokenKind::Rpar => {}
                _ => return true, // `*` and anything unexpected
            }
        }
        false
    }

    /// The arguments of an exception class's call, from token `j` (after the `(`): two or
    /// more, or a first one that is a literal other than a string.
    fn odd_exception_args(&self, j: usize) -> bool {
        match self.kind(j) {
            Some(
                TokenKind::Int
                | TokenKind::Float
                | TokenKind::Complex
                | TokenKind::True
                | TokenKind::False
                | TokenKind::None
                | TokenKind::Ellipsis,
            ) => return true,
            Some(TokenKind::String)
                if self
                    .text(j)
                    .trim_start_matches(['r', 'R'])
                    .starts_with(['b', 'B']) =>
            {
                return true;
            }
            _ => {}
        }
        let mut depth = 0usize;
        for k in j..self.tokens.len() {
            match self.tokens[k].0 {
                TokenKind::Lpar | TokenKind::Lsqb | TokenKind::Lbrace => depth += 1,
                TokenKind::Rpar | TokenKind::Rsqb | TokenKind::Rbrace => {
                    if depth == 0 {
                        return false;
                    }
                    depth -= 1;
                }
                TokenKind::Comma if depth == 0 => return true,
                TokenKind::Newline => return true, // unbalanced: cannot tell
                _ => {}
            }
        }
        true
    }

    /// A callback argument from token `j` to the `,` or `)` that ends it: true when it holds
    /// an attribute (a bound method) or is a lambda with a parenthesis (perhaps a call);
    /// a bare name is recorded (a finding if it is one of the script's functions).
    fn slot_needs_check(&self, j: usize, slot_names: &mut Vec<&'a str>) -> bool {
        let mut depth = 0usize;
        let mut end = self.tokens.len();
        for k in j..self.tokens.len() {
            match self.tokens[k].0 {
                TokenKind::Lpar | TokenKind::Lsqb | TokenKind::Lbrace => depth += 1,
                TokenKind::Rpar | TokenKind::Rsqb | TokenKind::Rbrace => {
                    if depth == 0 {
                        end = k;
                        break;
                    }
                    depth -= 1;
                }
                TokenKind::Comma if depth == 0 => {
                    end = k;
                    break;
                }
                TokenKind::Newline => return true, // unbalanced: cannot tell
                _ => {}
            }
        }
        let argument = &self.tokens[j..end];
        let has = |kind: TokenKind| argument.iter().any(|t| t.0 == kind);
        if has(TokenKind::Dot) || (has(TokenKind::Lambda) && has(TokenKind::Lpar)) {
            return true;
        }
        let names: Vec<usize> = (j..end)
            .filter(|&k| self.tokens[k].0 == TokenKind::Name)
            .collect();
        if let [only] = names[..]
            && argument
                .iter()
                .all(|t| matches!(t.0, TokenKind::Name | TokenKind::Lpar | TokenKind::Rpar))
        {
            slot_names.push(self.text(only));
        }
        false
    }
}

struct Walk<'s, 'a> {
    screen: &'s SubsetScreen,
    hit: bool,
    /// Names of the script's functions (`_check._tool_functions` only ever names those).
    defs: HashSet<&'a str>,
    /// Names passed where a callback goes (`sorted(key=f)`, `map(f, ...)`).
    slot_names: Vec<&'a str>,
    /// Names `import` statements bind (`import m`, `import m as x`): the module aliases.
    modules: HashSet<&'a str>,
    /// `x` of each `x.<name Monty's module lacks>`: a finding when `x` is a module alias.
    gap_owners: Vec<&'a str>,
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
    fn import_root(name: &str) -> &str {
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
            // a generator expression whose lazily evaluated part calls something (it may be
            // a tool: `_check_lazy` rewrites or refuses it)
            Expr::Generator(generator) => {
                contains_call(&generator.elt)
                    || generator.generators.iter().enumerate().any(|(k, g)| {
                        (k > 0 && contains_call(&g.iter)) || g.ifs.iter().any(contains_call)
                    })
            }
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
