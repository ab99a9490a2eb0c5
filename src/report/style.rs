//! Colour for the terminal renderers (anstyle): lit and P0 red, clear green,
//! unknown dim, warnings yellow. Whether colour is on is decided once by the
//! caller (`--color`, `NO_COLOR`, a TTY); every function here takes that
//! decision and returns plain text when it is off.

use anstyle::{AnsiColor, Style};

/// What a piece of text means, and so its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// Lit, failing, P0.
    Bad,
    /// Clear, healthy.
    Good,
    /// Recovered, inconclusive, a warning.
    Warn,
    /// Unknown, not checked, secondary text.
    Dim,
    /// Emphasis without a meaning.
    Bold,
}

fn style(tone: Tone) -> Style {
    match tone {
        Tone::Bad => Style::new().fg_color(Some(AnsiColor::Red.into())).bold(),
        Tone::Good => Style::new().fg_color(Some(AnsiColor::Green.into())),
        Tone::Warn => Style::new().fg_color(Some(AnsiColor::Yellow.into())).bold(),
        Tone::Dim => Style::new().dimmed(),
        Tone::Bold => Style::new().bold(),
    }
}

/// `s` in the colour of `tone`, or `s` itself when colour is off.
pub fn paint(color: bool, tone: Tone, s: &str) -> String {
    if !color || s.is_empty() {
        return s.to_string();
    }
    let st = style(tone);
    format!("{st}{s}{st:#}")
}

/// A timeline (`█` lit, `▁` clear, `·` unknown) coloured by run.
pub fn timeline(color: bool, t: &str) -> String {
    if !color {
        return t.to_string();
    }
    let mut out = String::new();
    let chars: Vec<char> = t.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let mut j = i;
        while j < chars.len() && chars[j] == c {
            j += 1;
        }
        let run: String = chars[i..j].iter().collect();
        let tone = match c {
            '█' => Tone::Bad,
            '▁' => Tone::Good,
            _ => Tone::Dim,
        };
        out.push_str(&paint(true, tone, &run));
        i = j;
    }
    out
}

/// Columns a string takes on a terminal: characters outside ANSI escape
/// sequences (the renderers write no double-width characters).
pub fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut esc = false;
    for c in s.chars() {
        if esc {
            if c.is_ascii_alphabetic() {
                esc = false;
            }
        } else if c == '\x1b' {
            esc = true;
        } else {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_when_on() {
        assert_eq!(paint(false, Tone::Bad, "LIT"), "LIT");
        let red = paint(true, Tone::Bad, "LIT");
        assert!(red.starts_with('\x1b') && red.contains("LIT") && red.ends_with('m'));
        assert_eq!(visible_len(&red), 3);
        assert_eq!(visible_len(&timeline(true, "▁▁██·")), 5);
        assert_eq!(timeline(false, "▁█"), "▁█");
    }
}
