// Package wordpiece is a Go port of the rules of HF's Rust `tokenizers` for BERT models:
// added (special) tokens matched verbatim, BertNormalizer, BertPreTokenizer, WordPiece,
// and the [CLS] ... [SEP] template with right truncation. Its ids are those of the HF fast
// tokenizer (checked by a differential test against PyPI tokenizers).
package wordpiece

import (
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer turns text into BERT input ids. It is immutable after Load and safe for
// concurrent use.
type Tokenizer struct {
	norm normalizer
	// vocab maps every vocabulary entry to its id (word-initial lookups); cont maps the
	// entries that start with the continuing prefix ("##"), keyed without that prefix.
	vocab, cont map[string]int32
	// maxVocabBytes and maxContBytes are the longest keys of vocab and cont: no longer
	// substring can match, so the greedy search starts there.
	maxVocabBytes, maxContBytes int
	maxWordChars                int // longer words (in chars) become one [UNK]
	unk, cls, sep, pad          int32
	// added are the added tokens (specials such as [CLS], [MASK]) that HF matches in the
	// raw text before normalization.
	added     []addedToken
	vocabSize int
	scratch   sync.Pool // *scratch
}

type addedToken struct {
	content string
	id      int32
}

// UnkID, ClsID, SepID and PadID are the ids of [UNK], [CLS], [SEP] and [PAD].
func (t *Tokenizer) UnkID() int32 { return t.unk }
func (t *Tokenizer) ClsID() int32 { return t.cls }
func (t *Tokenizer) SepID() int32 { return t.sep }
func (t *Tokenizer) PadID() int32 { return t.pad }

// VocabSize is one more than the largest id the tokenizer can produce.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// Encode returns the ids of [CLS] text [SEP], keeping the first maxLen-2 tokens of text
// (HF right truncation; maxLen counts the specials). maxLen <= 0 means no limit; 1 and 2
// both give just [CLS] [SEP].
func (t *Tokenizer) Encode(text string, maxLen int) []int32 {
	return t.AppendEncode(nil, text, maxLen)
}

// AppendEncode is Encode appending to dst (which it may grow), for callers that reuse
// one id buffer across texts.
func (t *Tokenizer) AppendEncode(dst []int32, text string, maxLen int) []int32 {
	dst = append(dst, t.cls)
	// bodyEnd is the length of dst at which text's tokens stop (truncation).
	bodyEnd := math.MaxInt
	if maxLen > 0 {
		bodyEnd = len(dst) + max(maxLen-2, 0)
	}
	sc, _ := t.scratch.Get().(*scratch)
	if sc == nil {
		sc = new(scratch)
	}
	sc.addedAt = sc.addedAt[:0]
	for _, a := range t.added {
		sc.addedAt = append(sc.addedAt, strings.Index(text, a.content))
	}
	for pos := 0; len(dst) < bodyEnd; {
		at, tok := t.nextAdded(text, pos, sc.addedAt)
		if at < 0 {
			dst = t.appendPiece(dst, sc, text[pos:], bodyEnd)
			break
		}
		dst = t.appendPiece(dst, sc, text[pos:at], bodyEnd)
		dst = append(dst, tok.id)
		pos = at + len(tok.content)
	}
	t.scratch.Put(sc)
	if len(dst) > bodyEnd {
		dst = dst[:bodyEnd]
	}
	return append(dst, t.sep)
}

// nextAdded finds the leftmost added token in text at or after pos (the longest one on a
// tie), as HF's leftmost-longest Aho-Corasick match does; at is -1 when there is none.
// addedAt[i] caches where t.added[i] next occurs (-1: nowhere), so that each token's
// search moves forward only and a text full of added tokens costs linear time.
func (t *Tokenizer) nextAdded(text string, pos int, addedAt []int) (at int, tok addedToken) {
	at = -1
	for i, a := range t.added {
		if addedAt[i] >= 0 && addedAt[i] < pos {
			addedAt[i] = strings.Index(text[pos:], a.content)
			if addedAt[i] >= 0 {
				addedAt[i] += pos
			}
		}
		if j := addedAt[i]; j >= 0 && (at < 0 || j < at || j == at && len(a.content) > len(tok.content)) {
			at, tok = j, a
		}
	}
	return at, tok
}

// chunkBytes is about how much raw text appendPiece normalizes at once.
const chunkBytes = 4096

// appendPiece normalizes and pre-tokenizes one stretch of text between added tokens
// and appends the WordPiece ids of its words, stopping once dst reaches bodyEnd.
// Long pieces go in chunks cut after an ASCII space: no rule looks across a space (it is
// a word boundary and an NFD starter), so the ids are the same, scratch memory stays
// bounded and truncation stops the work early.
func (t *Tokenizer) appendPiece(dst []int32, sc *scratch, piece string, bodyEnd int) []int32 {
	for len(piece) > 0 && len(dst) < bodyEnd {
		chunk := piece
		if len(piece) > chunkBytes {
			if i := strings.LastIndexByte(piece[:chunkBytes], ' '); i >= 0 {
				chunk = piece[:i+1]
			} else if i := strings.IndexByte(piece[chunkBytes:], ' '); i >= 0 {
				chunk = piece[:chunkBytes+i+1]
			}
		}
		dst = t.appendChunk(dst, sc, chunk, bodyEnd)
		piece = piece[len(chunk):]
	}
	return dst
}

// appendChunk is appendPiece for one chunk.
func (t *Tokenizer) appendChunk(dst []int32, sc *scratch, chunk string, bodyEnd int) []int32 {
	s := t.norm.normalize(sc, chunk)
	wordStart := -1 // start of the current word in s, -1 between words
	for i := 0; i < len(s) && len(dst) < bodyEnd; {
		size, space, punct := 1, false, false
		if b := s[i]; b < utf8.RuneSelf {
			c := asciiClasses[b]
			space, punct = c == asciiSpace, c == asciiPunct
		} else {
			var r rune
			r, size = utf8.DecodeRune(s[i:])
			c := t.norm.unicode.class(r)
			space, punct = c&classSpace != 0, c&(classSpace|classPunct) == classPunct
		}
		switch {
		case space || punct:
			if wordStart >= 0 {
				dst = t.appendWord(dst, s[wordStart:i])
				wordStart = -1
			}
			if punct {
				dst = t.appendWord(dst, s[i:i+size])
			}
		case wordStart < 0:
			wordStart = i
		}
		i += size
	}
	if wordStart >= 0 && len(dst) < bodyEnd {
		dst = t.appendWord(dst, s[wordStart:])
	}
	return dst
}

// appendWord appends the WordPiece ids of one pre-token: greedy longest match first,
// continuation pieces from cont; a word with an unmatched rest, or longer than
// maxWordChars, is a single [UNK].
func (t *Tokenizer) appendWord(dst []int32, w []byte) []int32 {
	if utf8.RuneCount(w) > t.maxWordChars {
		return append(dst, t.unk)
	}
	mark := len(dst)
	for start := 0; start < len(w); {
		table, maxBytes := t.vocab, t.maxVocabBytes
		if start > 0 {
			table, maxBytes = t.cont, t.maxContBytes
		}
		end := min(len(w), start+maxBytes)
		for ; end > start; end-- {
			if end < len(w) && !utf8.RuneStart(w[end]) {
				continue
			}
			if id, ok := table[string(w[start:end])]; ok {
				dst = append(dst, id)
				break
			}
		}
		if end == start {
			return append(dst[:mark], t.unk)
		}
		start = end
	}
	return dst
}
