//! The PMI-1 "simple" wire format, shared by the client ([`crate::Pmi`]) and
//! the launcher's PMI server so that both ends parse the same way.
//!
//! A message is one line: `cmd=NAME key=value key=value ...\n`. Tokens are
//! separated by spaces; a token splits at its first `=`, so a value may hold
//! `=` (MPICH's hydra accepts that too) but never a space or a newline.
//! Decoding is a checked parse: a malformed line is an error, never a panic.

use crate::PmiError;

/// Longest line either side accepts, newline included. Hydra's values are at
/// most 1024 bytes; this leaves room for keys and the command while bounding
/// what a broken peer can make us buffer.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One decoded PMI-1 message: the command and its `key=value` pairs in the
/// order they appeared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmiLine {
    /// The value of the leading `cmd=` token.
    pub command: String,
    /// The remaining tokens, split at their first `=`.
    pub pairs: Vec<(String, String)>,
}

/// Free text (an abort message) as one PMI value: `%`, `=`, whitespace and
/// control characters become `%XX` (UTF-8 bytes in hex), everything else
/// stays; [`decode_text`] gives the text back. A process manager that does
/// not decode (hydra) shows the escapes, still readable.
pub fn encode_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        if character == '%'
            || character == '='
            || character.is_whitespace()
            || character.is_control()
        {
            let mut buffer = [0u8; 4];
            for byte in character.encode_utf8(&mut buffer).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(character);
        }
    }
    out
}

/// The text of a value [`encode_text`] made; an escape that is not `%XX`
/// stays as it is, and bytes that are not UTF-8 become U+FFFD (a peer's
/// value is never trusted to be well formed).
pub fn decode_text(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl PmiLine {
    /// A message for `command` with no pairs yet.
    pub fn new(command: &str) -> PmiLine {
        PmiLine {
            command: command.to_string(),
            pairs: Vec::new(),
        }
    }

    /// This message with `key=value` appended.
    pub fn with(mut self, key: &str, value: impl ToString) -> PmiLine {
        self.pairs.push((key.to_string(), value.to_string()));
        self
    }

    /// The value of the first pair named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// The value of `key`, or an error naming the command and the key.
    pub fn require(&self, key: &str) -> Result<&str, PmiError> {
        self.get(key).ok_or_else(|| {
            PmiError::new(format!(
                "reply 'cmd={}' lacks the field '{key}'",
                self.command
            ))
        })
    }

    /// Decodes one line (with or without its trailing newline).
    pub fn parse(line: &str) -> Result<PmiLine, PmiError> {
        if line.len() > MAX_LINE_BYTES {
            return Err(PmiError::new(format!(
                "PMI line of {} bytes exceeds the limit of {MAX_LINE_BYTES}",
                line.len()
            )));
        }
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        // One line, printable: a newline inside would make a command or a
        // value that no encoded line can carry (cargo-fuzz found
        // `cmd=\n\n\n` parsing as the command "\n\n").
        // Tokens are separated by ' ' only: other whitespace (a tab, a
        // no-break space) would be part of a token here and not in a
        // reader that splits on it (cargo-fuzz: `cmd=\u{a0}`).
        if line.chars().any(|character| {
            character.is_control() || (character.is_whitespace() && character != ' ')
        }) {
            return Err(PmiError::new(format!(
                "PMI line contains a control character or whitespace other than a space: {}",
                printable(line)
            )));
        }
        let mut tokens = line.split(' ').filter(|token| !token.is_empty());
        let first = tokens
            .next()
            .ok_or_else(|| PmiError::new("empty PMI line"))?;
        let command = first
            .strip_prefix("cmd=")
            .filter(|command| !command.is_empty())
            .ok_or_else(|| {
                PmiError::new(format!(
                    "PMI line does not start with 'cmd=NAME': {}",
                    printable(line)
                ))
            })?;
        let mut pairs = Vec::new();
        for token in tokens {
            let (key, value) = token.split_once('=').ok_or_else(|| {
                PmiError::new(format!(
                    "PMI token '{}' is not key=value in line: {}",
                    printable(token),
                    printable(line)
                ))
            })?;
            if key.is_empty() {
                return Err(PmiError::new(format!(
                    "PMI token with an empty key in line: {}",
                    printable(line)
                )));
            }
            pairs.push((key.to_string(), value.to_string()));
        }
        Ok(PmiLine {
            command: command.to_string(),
            pairs,
        })
    }

    /// Encodes this message as one line ending in `\n`.
    ///
    /// The caller must have checked keys and values with [`check_token`];
    /// this function only concatenates.
    pub fn encode(&self) -> String {
        let mut line = format!("cmd={}", self.command);
        for (key, value) in &self.pairs {
            line.push(' ');
            line.push_str(key);
            line.push('=');
            line.push_str(value);
        }
        line.push('\n');
        line
    }
}

/// Bytes of the decimal length that precedes every PMI-2 message.
pub const PMI2_LENGTH_BYTES: usize = 6;

/// The most bytes of one PMI-2 message body: what its 6-digit length can
/// say, and MPICH's and Slurm's 64 KiB command limit.
pub const PMI2_MAX_BODY_BYTES: usize = 64 * 1024;

impl PmiLine {
    /// Encodes this message in the PMI-2 wire format (MPICH's `simple2pmi`,
    /// Slurm's `mpi/pmi2`): a 6-character decimal length, then
    /// `cmd=NAME;key=value;...;` where a `;` inside a value is doubled.
    pub fn encode_pmi2(&self) -> Vec<u8> {
        let mut body = format!("cmd={};", self.command);
        for (key, value) in &self.pairs {
            body.push_str(key);
            body.push('=');
            body.push_str(&value.replace(';', ";;"));
            body.push(';');
        }
        let mut message = format!("{:<width$}", body.len(), width = PMI2_LENGTH_BYTES).into_bytes();
        message.extend_from_slice(body.as_bytes());
        message
    }

    /// The length a PMI-2 message announces in its first
    /// [`PMI2_LENGTH_BYTES`] bytes (decimal, padded with spaces on either
    /// side).
    pub fn parse_pmi2_length(header: &[u8]) -> Result<usize, PmiError> {
        let length = std::str::from_utf8(header)
            .ok()
            .and_then(|text| text.trim_matches(' ').parse::<usize>().ok())
            .filter(|&length| length <= PMI2_MAX_BODY_BYTES)
            .ok_or_else(|| {
                PmiError::new(format!(
                    "PMI-2 message length '{}' is not a number of at most {PMI2_MAX_BODY_BYTES} bytes",
                    printable(&String::from_utf8_lossy(header))
                ))
            })?;
        Ok(length)
    }

    /// Parses a PMI-2 message body (after its length): `cmd=NAME;` first,
    /// then `key=value;` pairs, `;;` standing for a `;` inside a value.
    pub fn parse_pmi2_body(body: &[u8]) -> Result<PmiLine, PmiError> {
        let text =
            std::str::from_utf8(body).map_err(|_| PmiError::new("a PMI-2 message is not UTF-8"))?;
        if text.chars().any(char::is_control) {
            return Err(PmiError::new(format!(
                "PMI-2 message contains a control character: {}",
                printable(text)
            )));
        }
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut characters = text.chars().peekable();
        while let Some(character) = characters.next() {
            if character != ';' {
                field.push(character);
            } else if characters.peek() == Some(&';') {
                characters.next();
                field.push(';');
            } else {
                fields.push(std::mem::take(&mut field));
            }
        }
        if !field.is_empty() {
            fields.push(field);
        }
        let mut fields = fields.into_iter().filter(|field| !field.is_empty());
        let command = fields
            .next()
            .and_then(|first| first.strip_prefix("cmd=").map(str::to_string))
            .filter(|command| !command.is_empty() && !command.contains(['=', ';']))
            .ok_or_else(|| {
                PmiError::new(format!(
                    "PMI-2 message does not start with 'cmd=NAME;': {}",
                    printable(text)
                ))
            })?;
        let mut pairs = Vec::new();
        for field in fields {
            let (key, value) = field
                .split_once('=')
                // `;;` is a `;` in values only.
                .filter(|(key, _)| !key.is_empty() && !key.contains(';'))
                .ok_or_else(|| {
                    PmiError::new(format!(
                        "PMI-2 field '{}' is not key=value in: {}",
                        printable(&field),
                        printable(text)
                    ))
                })?;
            pairs.push((key.to_string(), value.to_string()));
        }
        Ok(PmiLine { command, pairs })
    }
}

/// Checks that `text` can travel as a PMI key (`is_key`) or value: no space,
/// no control character (newline included), and for keys no `=` and not
/// empty. Returns what is wrong, for the caller's error message.
pub fn check_token(text: &str, is_key: bool) -> Result<(), String> {
    if is_key && text.is_empty() {
        return Err("a PMI key must not be empty".to_string());
    }
    if let Some(bad) = text.chars().find(|&character| {
        character == ' ' || character.is_control() || (is_key && character == '=')
    }) {
        let what = if is_key { "key" } else { "value" };
        return Err(format!(
            "PMI {what} '{}' contains {bad:?}, which the PMI-1 wire format cannot carry (escape or hex-encode it)",
            printable(text)
        ));
    }
    Ok(())
}

/// `text` shortened and with control characters escaped, for error messages.
fn printable(text: &str) -> String {
    const LIMIT_CHARACTERS: usize = 120;
    let mut shown: String = text
        .chars()
        .take(LIMIT_CHARACTERS)
        .flat_map(char::escape_default)
        .collect();
    if text.chars().count() > LIMIT_CHARACTERS {
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_command_and_pairs_in_order() {
        let line = PmiLine::parse("cmd=get_result rc=0 msg=success value=a=b\n").unwrap();
        assert_eq!(line.command, "get_result");
        assert_eq!(line.get("rc"), Some("0"));
        assert_eq!(line.get("value"), Some("a=b"));
        assert_eq!(line.get("missing"), None);
        assert_eq!(line.pairs.len(), 3);
    }

    #[test]
    fn parse_tolerates_repeated_spaces_and_carriage_return() {
        let line = PmiLine::parse("cmd=barrier_out  rc=0 \r\n").unwrap();
        assert_eq!(line.command, "barrier_out");
        assert_eq!(line.get("rc"), Some("0"));
    }

    #[test]
    fn a_control_character_inside_the_line_is_an_error() {
        // Found by cargo-fuzz: accepted as the command "\n\n", which no
        // encoded line can carry.
        for line in [
            "cmd=\n\n\n",
            "cmd=put key=a\tb",
            "cmd=get\n key=x",
            "cmd=\u{a0}   ",
        ] {
            let error = PmiLine::parse(line).unwrap_err();
            assert!(error.to_string().contains("control character"), "{error}");
        }
    }

    #[test]
    fn pmi2_messages_round_trip_with_doubled_semicolons() {
        let message = PmiLine::new("kvs-put")
            .with("key", "card-0")
            .with("value", "a;b;;c=d");
        let bytes = message.encode_pmi2();
        let length = PmiLine::parse_pmi2_length(&bytes[..PMI2_LENGTH_BYTES]).unwrap();
        let body = &bytes[PMI2_LENGTH_BYTES..];
        assert_eq!(length, body.len());
        assert_eq!(body, b"cmd=kvs-put;key=card-0;value=a;;b;;;;c=d;");
        assert_eq!(PmiLine::parse_pmi2_body(body).unwrap(), message);
        // Slurm pads the length on the left, MPICH on the right.
        assert_eq!(PmiLine::parse_pmi2_length(b"    42").unwrap(), 42);
        assert_eq!(PmiLine::parse_pmi2_length(b"42    ").unwrap(), 42);
        for bad in [&b"abcdef"[..], b"999999", b"      "] {
            assert!(PmiLine::parse_pmi2_length(bad).is_err());
        }
        let reply = PmiLine::parse_pmi2_body(
            b"cmd=fullinit-response;rc=0;pmi-version=2;rank=1;size=4;appnum=0;",
        )
        .unwrap();
        assert_eq!(reply.command, "fullinit-response");
        assert_eq!(reply.get("size"), Some("4"));
        for bad in [
            &b"key=value;"[..],
            b"cmd=;",
            b"cmd=x;novalue;",
            b"cmd=x;=v;",
        ] {
            assert!(PmiLine::parse_pmi2_body(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parse_keeps_empty_values() {
        let line = PmiLine::parse("cmd=put kvsname=k key=x value=").unwrap();
        assert_eq!(line.get("value"), Some(""));
    }

    #[test]
    fn parse_rejects_malformed_lines() {
        assert!(PmiLine::parse("").is_err());
        assert!(PmiLine::parse("\n").is_err());
        assert!(PmiLine::parse("key=value").is_err());
        assert!(PmiLine::parse("cmd=").is_err());
        assert!(PmiLine::parse("cmd=put novalue").is_err());
        assert!(PmiLine::parse("cmd=put =value").is_err());
        let long = format!("cmd=put value={}", "x".repeat(MAX_LINE_BYTES));
        assert!(PmiLine::parse(&long).is_err());
    }

    #[test]
    fn encode_then_parse_round_trips() {
        let line = PmiLine::new("put")
            .with("kvsname", "kvs_1")
            .with("key", "card-0")
            .with("value", "tcp://10.0.0.1:5000");
        let text = line.encode();
        assert_eq!(
            text,
            "cmd=put kvsname=kvs_1 key=card-0 value=tcp://10.0.0.1:5000\n"
        );
        assert_eq!(PmiLine::parse(&text).unwrap(), line);
    }

    #[test]
    fn check_token_rejects_what_the_wire_cannot_carry() {
        assert!(check_token("card-0", true).is_ok());
        assert!(check_token("a=b", false).is_ok());
        assert!(check_token("", false).is_ok());
        assert!(check_token("", true).is_err());
        assert!(check_token("a=b", true).is_err());
        assert!(check_token("a b", false).is_err());
        assert!(check_token("a\nb", false).is_err());
        assert!(check_token("a\tb", true).is_err());
    }

    #[test]
    fn require_names_the_missing_field() {
        let line = PmiLine::parse("cmd=maxes kvsname_max=256").unwrap();
        let error = line.require("vallen_max").unwrap_err();
        assert!(error.to_string().contains("vallen_max"), "{error}");
    }
}
