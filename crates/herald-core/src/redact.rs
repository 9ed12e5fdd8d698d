//! Keeping secrets out of `Debug` output and messages (guarantee 11: payloads, keys and
//! secrets are never logged). A field holding an API key, a signing secret, the admin key,
//! a password or a digest of one prints as `***`; a URL keeps all but its passwords.

use std::fmt;

/// Prints `***` where a secret would be: `.field("webhook_secret", &Redacted)`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Redacted;

impl Redacted {
    /// `Some(***)` or `None`: whether an optional secret is set, never what it is.
    pub fn of<T>(secret: &Option<T>) -> Option<Redacted> {
        secret.as_ref().map(|_| Redacted)
    }
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// `url` with the password of its user info and the value of every query parameter named
/// like a password replaced by `***`: `postgres://u:***@host/db?password=***`. Works on
/// the raw text, so a URL too broken to parse is redacted too; when unsure where the user
/// info ends (an `@` in the query) it hides too much rather than too little.
pub fn redact_url(url: &str) -> String {
    let mut redacted = match (url.find("://"), url.rfind('@')) {
        (Some(start), Some(at)) if at > start => match url[start + 3..at].split_once(':') {
            Some((user, _password)) => format!("{}{user}:***{}", &url[..start + 3], &url[at..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    };
    if let Some((base, query)) = redacted.split_once('?') {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _value)) if key.to_ascii_lowercase().contains("password") => {
                    format!("{key}=***")
                }
                _ => pair.to_string(),
            })
            .collect();
        redacted = format!("{base}?{}", pairs.join("&"));
    }
    redacted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_all_but_their_passwords() {
        let cases = [
            ("postgres://u:secret@h/db", "postgres://u:***@h/db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("herald.db", "herald.db"),
            ("sqlite://./data/herald.db", "sqlite://./data/herald.db"),
            ("smtps://u:smtpp4ss@h:465", "smtps://u:***@h:465"),
            ("smtp://h:587?tls=starttls", "smtp://h:587?tls=starttls"),
            ("postgres://u:p@ss@h/db", "postgres://u:***@h/db"),
            ("postgres://u:pa?ss@h/db", "postgres://u:***@h/db"),
            (
                "postgres://h/db?user=u&password=secret&sslmode=require",
                "postgres://h/db?user=u&password=***&sslmode=require",
            ),
            ("postgres://u:secret@h/db?PASSWORD=secret", "postgres://u:***@h/db?PASSWORD=***"),
        ];
        for (input, expect) in cases {
            assert_eq!(redact_url(input), expect, "{input}");
        }
    }

    #[test]
    fn redacted_shows_only_whether_a_secret_is_set() {
        assert_eq!(format!("{:?}", Redacted), "***");
        assert_eq!(format!("{:?}", Redacted::of(&Some("adm1nsecret"))), "Some(***)");
        assert_eq!(format!("{:?}", Redacted::of::<String>(&None)), "None");
    }
}
