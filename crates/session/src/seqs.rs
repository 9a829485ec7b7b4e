//! `sourceEventSeqs` run encoding (format §3.3).

use serde_json::Value;

use crate::error::SeqsError;
use crate::json::as_safe_u64;

/// Encodes a logical seq list physically: a strictly increasing list writes every run of three
/// or more consecutive integers as `[start, end]`; any other list is written verbatim.
pub fn encode_runs(seqs: &[u64]) -> Value {
    let increasing = seqs.windows(2).all(|w| w[0] < w[1]);
    if !increasing {
        return Value::Array(seqs.iter().map(|s| Value::from(*s)).collect());
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        if j - i + 1 >= 3 {
            out.push(Value::Array(vec![
                Value::from(seqs[i]),
                Value::from(seqs[j]),
            ]));
        } else {
            out.extend(seqs[i..=j].iter().map(|s| Value::from(*s)));
        }
        i = j + 1;
    }
    Value::Array(out)
}

/// Decodes the physical form into the logical list and validates it against the owning event's
/// seq: non-empty, distinct, every member a non-negative safe integer smaller than `own_seq`.
pub fn decode_runs(value: &Value, own_seq: u64) -> Result<Vec<u64>, SeqsError> {
    let items = value.as_array().ok_or(SeqsError::NotArray)?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::Array(pair) => {
                let bad = || SeqsError::BadRun(item.to_string());
                let [a, b] = pair.as_slice() else {
                    return Err(bad());
                };
                let (Some(a), Some(b)) = (as_safe_u64(a), as_safe_u64(b)) else {
                    return Err(bad());
                };
                if a > b {
                    return Err(bad());
                }
                if b >= own_seq {
                    return Err(SeqsError::NotEarlier {
                        member: b,
                        seq: own_seq,
                    });
                }
                out.extend(a..=b);
            }
            other => {
                let s = as_safe_u64(other).ok_or(SeqsError::BadMember)?;
                out.push(s);
            }
        }
    }
    validate_logical(&out, own_seq)?;
    Ok(out)
}

/// Validates a logical seq list (non-empty, distinct, each earlier than `own_seq`).
pub fn validate_logical(seqs: &[u64], own_seq: u64) -> Result<(), SeqsError> {
    if seqs.is_empty() {
        return Err(SeqsError::Empty);
    }
    let mut seen = std::collections::HashSet::with_capacity(seqs.len());
    for s in seqs {
        if *s >= own_seq {
            return Err(SeqsError::NotEarlier {
                member: *s,
                seq: own_seq,
            });
        }
        if !seen.insert(*s) {
            return Err(SeqsError::Repeated(*s));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_of_the_reference() {
        assert_eq!(encode_runs(&[14]), json!([14]));
        assert_eq!(encode_runs(&[8, 9]), json!([8, 9]));
        assert_eq!(encode_runs(&[4, 5, 6]), json!([[4, 6]]));
        assert_eq!(encode_runs(&[2, 3, 7, 8, 9, 10]), json!([2, 3, [7, 10]]));
        assert_eq!(encode_runs(&[17, 18, 8, 9]), json!([17, 18, 8, 9]));
    }

    #[test]
    fn decode_round_trips() {
        for list in [
            vec![14],
            vec![8, 9],
            vec![4, 5, 6],
            vec![2, 3, 7, 8, 9, 10],
            vec![17, 18, 8, 9],
        ] {
            assert_eq!(decode_runs(&encode_runs(&list), 100).unwrap(), list);
        }
    }

    #[test]
    fn decode_rejects_bad_lists() {
        assert_eq!(decode_runs(&json!([]), 5), Err(SeqsError::Empty));
        assert_eq!(
            decode_runs(&json!([5]), 5),
            Err(SeqsError::NotEarlier { member: 5, seq: 5 })
        );
        assert_eq!(decode_runs(&json!([1, 1]), 5), Err(SeqsError::Repeated(1)));
        assert_eq!(
            decode_runs(&json!([[1, 3], 2]), 5),
            Err(SeqsError::Repeated(2))
        );
        assert!(matches!(
            decode_runs(&json!([[3, 1]]), 5),
            Err(SeqsError::BadRun(_))
        ));
        assert!(matches!(
            decode_runs(&json!([[1, 2, 3]]), 5),
            Err(SeqsError::BadRun(_))
        ));
        assert_eq!(decode_runs(&json!(["1"]), 5), Err(SeqsError::BadMember));
        assert_eq!(decode_runs(&json!(3), 5), Err(SeqsError::NotArray));
    }
}
