//! What looks like an effect and strands nothing: a file written under a name made
//! random here or copied from another stored file (garbage after a rollback, as a `copy`
//! is), and a request that only computes an answer (a model's inference, a translation).
//! `effects.rs` asks these before it counts a write or a request; each came from false
//! findings of the precision triage (docs/audit.md).

use super::effects::{lower_in, short};
use super::services::Service;
use super::{Analysis, Frame};
use crate::ir::{Call, Callee, Expr};

/// Requests that compute an answer and change nothing remote — a model's inference, an
/// embedding, a translation — by host and a fragment of the path. Inside a transaction
/// they hold it open during a network call, but a rollback strands nothing: Event
/// Schedule's Gemini translations in the corpus (docs/audit.md). A request to any other
/// address is an effect.
const COMPUTE_ENDPOINTS: [(&str, &str); 15] = [
    ("generativelanguage.googleapis.com", ":generateContent"),
    ("generativelanguage.googleapis.com", ":streamGenerateContent"),
    ("generativelanguage.googleapis.com", ":embedContent"),
    ("generativelanguage.googleapis.com", ":batchEmbedContents"),
    ("generativelanguage.googleapis.com", ":countTokens"),
    ("api.openai.com", "/chat/completions"),
    ("api.openai.com", "/embeddings"),
    ("api.openai.com", "/moderations"),
    ("api.anthropic.com", "/messages"),
    ("api.mistral.ai", "/chat/completions"),
    ("api.mistral.ai", "/embeddings"),
    ("translation.googleapis.com", "/translate"),
    ("translation.googleapis.com", ":translateText"),
    ("api.deepl.com", "/translate"),
    ("api-free.deepl.com", "/translate"),
];

impl<'a> Analysis<'a> {
    /// A write a rollback leaves as garbage, as it does a `copy`: a new file under a name
    /// made random here (`Str::random(32)`, `Str::uuid()`, `uniqid()`, `$file->hashName()`;
    /// Event Schedule's imported images in the corpus), or a copy spelled as a write of
    /// what another stored file holds (`$private->put($to, $public->get($from))`; UnoPim's
    /// demo seeder).
    pub(super) fn writes_garbage(&self, call: &'a Call, name: &str, frame: &Frame<'a>) -> bool {
        if !lower_in(name, &["put", "putFile", "putFileAs", "write", "writeStream"]) {
            return false;
        }
        let fresh = call.args.first().is_some_and(|a| {
            fresh_name(&a.value)
                || self.env(frame).is_some_and(|env| mentions_any(&a.value, &env.fresh))
        });
        let copied = lower_in(name, &["put", "write", "writeStream"])
            && call.args.get(1).is_some_and(|a| self.reads_stored_file(&a.value, frame));
        fresh || copied
    }

    /// Whether `e` reads a stored file whole: `->get()`/`->readStream()` on a disk.
    fn reads_stored_file(&self, e: &'a Expr, frame: &Frame<'a>) -> bool {
        let Expr::Call(c) = e else { return false };
        let Callee::Method { object, name } = &c.callee else { return false };
        lower_in(name, &["get", "readStream"])
            && self.service_of(&self.types_of(object, frame)) == Some(Service::Storage)
    }

    /// The address a `curl_exec($ch)` goes to: `$ch = curl_init($url)` in the same function.
    pub(super) fn curl_url(&self, exec: &'a Call, frame: &Frame<'a>) -> Option<&'a Expr> {
        let Some(Expr::Var(handle)) = exec.args.first().map(|a| &a.value) else { return None };
        let init = self.env(frame)?.calls.get(handle)?;
        match &init.callee {
            Callee::Function(f) if f.trim_start_matches('\\').eq_ignore_ascii_case("curl_init") => {
                init.args.first().map(|a| &a.value)
            }
            _ => None,
        }
    }

    /// Whether a request to `url` (literal, built, or a variable assigned one in the same
    /// function) only computes an answer: `COMPUTE_ENDPOINTS`.
    pub(super) fn computes_only(&self, url: Option<&'a Expr>, frame: &Frame<'a>) -> bool {
        let url = match url {
            Some(Expr::Var(v)) => self.env(frame).and_then(|env| env.strings.get(v).copied()?),
            other => other,
        };
        let Some(url) = url else { return false };
        let mut text = String::new();
        literal_text(url, &mut text);
        let text = text.to_ascii_lowercase();
        COMPUTE_ENDPOINTS.iter().any(|(host, path)| {
            let host = ["https://", host].concat();
            text.starts_with(&host) && text.contains(&path.to_ascii_lowercase())
        })
    }
}

/// Whether `e` makes a random name: `Str::random()`, `Str::uuid()`, `Str::ulid()`,
/// `Uuid::uuid4()`, `uniqid()`, `random_bytes()`, `->hashName()`.
pub(super) fn fresh_name(e: &Expr) -> bool {
    if let Expr::Call(c) = e {
        let hit = match &c.callee {
            Callee::Static { class, name } => {
                (short(class).eq_ignore_ascii_case("Str")
                    && lower_in(name, &["random", "uuid", "orderedUuid", "ulid"]))
                    || (short(class).eq_ignore_ascii_case("Uuid")
                        && lower_in(name, &["uuid4", "uuid7", "v4", "v7"]))
            }
            Callee::Function(f) => {
                lower_in(f.trim_start_matches('\\'), &["uniqid", "random_bytes", "str_random"])
            }
            Callee::Method { name, .. } => name.eq_ignore_ascii_case("hashName"),
            Callee::Dynamic(_) => false,
        };
        if hit {
            return true;
        }
    }
    if matches!(e, Expr::Closure(_)) {
        return false;
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || fresh_name(c));
    found
}

/// Whether `e` reads one of `vars`.
fn mentions_any(e: &Expr, vars: &std::collections::HashSet<String>) -> bool {
    if let Expr::Var(v) = e {
        return vars.contains(v);
    }
    let mut found = false;
    e.for_each_child(&mut |c| found = found || mentions_any(c, vars));
    found
}

/// The literal parts of a string built by interpolation or concatenation, in order, with
/// a NUL where a value goes.
fn literal_text(e: &Expr, out: &mut String) {
    match e {
        Expr::Str(s) => out.push_str(s),
        Expr::Other(parts) => parts.iter().for_each(|p| literal_text(p, out)),
        _ => out.push('\0'),
    }
}
