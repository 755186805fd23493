//! A depth limit checked before parsing: `syn` and our walkers recurse once per nesting level,
//! so a hostile file with hundreds of thousands of brackets would overflow even a large stack
//! and abort the process. One linear pass over the text answers first, with a clean error.

/// Deeper than any real kernel by far; well below what the reader's stack can hold.
pub const MAX_NESTING: usize = 2_000;

/// `Err((line, depth))` at the first bracket that goes deeper than `limit`.
///
/// Comments, string and char literals are skipped, so brackets inside them do not count.
/// The scan is lexical and approximate (raw strings with `#` guards are skipped by their
/// quotes only); it only has to be exact enough to stay far from the stack's limit.
pub fn check(source: &str, limit: usize) -> Result<(), (usize, usize)> {
    let bytes = source.as_bytes();
    let (mut i, mut depth, mut line) = (0usize, 0usize, 1usize);
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied().unwrap_or(0);
        match c {
            b'\n' => line += 1,
            b'/' if next == b'/' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if next == b'*' => {
                // block comments nest in Rust
                let mut level = 0usize;
                while i < bytes.len() {
                    if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') {
                        level += 1;
                        i += 2;
                    } else if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        if bytes[i] == b'\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
                continue;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    } else if bytes[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            // a char literal ('(' or '\''), not a lifetime ('a)
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if next == b'\\' => {
                i += 2;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err((line, depth));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_brackets_outside_comments_and_literals() {
        assert_eq!(check("fn f() { (1) }", 2), Ok(()));
        assert_eq!(check("fn f() { ((1)) }", 2), Err((1, 3)));
        assert_eq!(
            check("// (((\n/* ((( /* ( */ */ \"(((\" '(' fn f<'a>() {}", 1),
            Ok(())
        );
    }
}
