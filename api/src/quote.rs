//! User input quoted in messages, cut short: an error never echoes a megabyte back.

/// Characters of a user's value quoted in an error message.
pub const MAX_QUOTED: usize = 100;

/// `s` cut to [`MAX_QUOTED`] characters, saying how much was left out, for quoting
/// user input in messages without echoing a megabyte back.
pub fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    clip_to(s, MAX_QUOTED)
}

/// `s` cut to `max` characters, saying how many bytes were left out.
pub fn clip_to(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => s.into(),
        Some((at, _)) => format!("{}... ({} more bytes)", &s[..at], s.len() - at).into(),
    }
}
