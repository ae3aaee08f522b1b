// SPDX-License-Identifier: GPL-2.0
//! The number grammar of scripts, event specs and the tool's options.

/// Parses an unsigned number: `0x` hex, `0b` binary, or decimal (`_` allowed).
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.replace('_', "");
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if let Some(b) = s.strip_prefix("0b") {
        u64::from_str_radix(b, 2).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("0x1_0"), Some(16));
        assert_eq!(parse_u64("0X10"), Some(16));
        assert_eq!(parse_u64("0b101"), Some(5));
        assert_eq!(parse_u64("42"), Some(42));
        assert_eq!(parse_u64("0x"), None);
        assert_eq!(parse_u64("-1"), None);
    }
}
