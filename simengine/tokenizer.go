package simengine

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Token-ID layout of the simulated tokenizer. IDs below TokenOffset are reserved
// for special tokens; text pieces map to [TokenOffset, TokenOffset+VocabSize).
const (
	// VocabSize is the number of distinct IDs text pieces are hashed onto.
	VocabSize = 100_000
	// TokenOffset is the first ID used for text pieces.
	TokenOffset = 1000
	// MaxPieceBytes bounds one piece; longer words are split at rune boundaries
	// so that long strings (identifiers, base64) cost several tokens, as with BPE.
	MaxPieceBytes = 16
)

// Special tokens of the chat template.
const (
	TokenEOS       uint32 = 2 // end of sequence (never generated: the engine always runs to max_tokens)
	TokenSystem    uint32 = 3 // starts a system (or developer) message
	TokenUser      uint32 = 4 // starts a user message
	TokenAssistant uint32 = 5 // starts an assistant message; also the generation prompt
	TokenTool      uint32 = 6 // starts a tool-result message
	TokenEnd       uint32 = 7 // ends every message
	TokenTools     uint32 = 8 // starts the tool-definitions section
)

var specialNames = map[uint32]string{
	TokenEOS: "<|eos|>", TokenSystem: "<|system|>", TokenUser: "<|user|>", TokenAssistant: "<|assistant|>",
	TokenTool: "<|tool|>", TokenEnd: "<|end|>", TokenTools: "<|tools|>",
}

// TokenID maps one text piece to its token ID: TokenOffset + FNV-1a-32(piece) mod
// VocabSize. It is a pure function, so every engine instance (and any router that
// wants to predict tokens without calling render) agrees on it.
func TokenID(piece string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(piece); i++ {
		h ^= uint32(piece[i])
		h *= 16777619
	}
	return TokenOffset + h%VocabSize
}

// Tokenize appends the token IDs of text to dst and returns it.
//
// Pieces, scanned left to right:
//  1. a run of letters and digits, with at most one directly preceding space
//     (U+0020) included ("hello world" → "hello", " world");
//  2. any other non-space rune (punctuation, symbols), also with at most one
//     preceding space, is a piece of its own;
//  3. any other whitespace rune (newline, tab, a space not followed by case 1 or 2)
//     is a piece of its own.
//
// Pieces longer than MaxPieceBytes are split at rune boundaries; invalid UTF-8
// bytes are single-byte pieces. Each piece maps through TokenID.
func Tokenize(dst []uint32, text string) []uint32 {
	i := 0
	for i < len(text) {
		start := i
		if text[i] == ' ' && i+1 < len(text) && !isSpaceAt(text, i+1) {
			i++ // the space joins the following piece
		}
		r, w := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == utf8.RuneError && w <= 1:
			i += max(w, 1)
		case isWordRune(r):
			i += w
			for i < len(text) {
				r2, w2 := utf8.DecodeRuneInString(text[i:])
				if !isWordRune(r2) || (r2 == utf8.RuneError && w2 <= 1) {
					break
				}
				i += w2
			}
		default:
			i += w
		}
		dst = appendPieces(dst, text[start:i])
	}
	return dst
}

func isSpaceAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r)
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// appendPieces splits an over-long piece at rune boundaries.
func appendPieces(dst []uint32, p string) []uint32 {
	for len(p) > MaxPieceBytes {
		cut := MaxPieceBytes
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		if cut == 0 {
			cut = MaxPieceBytes
		}
		dst = append(dst, TokenID(p[:cut]))
		p = p[cut:]
	}
	return append(dst, TokenID(p))
}

// genWords is the vocabulary of generated text. Every generated token is
// " "+word, so generated text re-tokenizes to exactly the generated IDs, and an
// assistant turn sent back in a multi-turn conversation hits the decode blocks.
var genWords = strings.Fields(`the of and to in is that it was for on are as with his they at be this from
have or by one had not but what all were when we there can an your which their said if do will each
about how up out them then she many some so these would other into has more her two like him see time
could no make than first been its who now people my made over did down only way find use may water long
little very after words called just where most know get through back much go good new write our me man
too any day same right look think also around another came come work three word must because does part`)

var genIDs = func() []uint32 {
	ids := make([]uint32, len(genWords))
	for i, w := range genWords {
		ids[i] = TokenID(" " + w)
	}
	return ids
}()

var genText = func() map[uint32]string {
	m := make(map[uint32]string, len(genWords)+len(specialNames))
	for i, w := range genWords {
		m[genIDs[i]] = " " + w
	}
	for id, s := range specialNames {
		m[id] = s
	}
	return m
}()

// Detokenize renders token IDs as text. Generated tokens and special tokens map
// back exactly; any other ID (prompt text is hashed, so it cannot be inverted)
// renders as "<id>".
func Detokenize(ids []uint32) string {
	var b strings.Builder
	for _, id := range ids {
		if s, ok := genText[id]; ok {
			b.WriteString(s)
			continue
		}
		b.WriteByte('<')
		b.WriteString(strconv.FormatUint(uint64(id), 10))
		b.WriteByte('>')
	}
	return b.String()
}

// Message is one chat message after API-specific parsing: a role and its text.
type Message struct {
	Role    string // system, developer, user, assistant, tool (or function)
	Content string
}

// ErrUnknownRole is returned by ApplyChatTemplate for a role it has no marker for.
var ErrUnknownRole = errors.New("engine: unknown chat role")

// ApplyChatTemplate appends the templated prompt of a conversation to dst:
//
//	[<|tools|> tokens(tools) <|end|>]            only when tools != ""
//	<|role|> tokens(content) <|end|>             for every message
//	<|assistant|>                                when addGenerationPrompt
//
// Roles map to markers: system and developer → <|system|>, user → <|user|>,
// assistant → <|assistant|>, tool and function → <|tool|>. The same template
// serves chat completions, Anthropic Messages and Responses, so the three APIs
// share a prefix cache for the same conversation.
func ApplyChatTemplate(dst []uint32, msgs []Message, tools string, addGenerationPrompt bool) ([]uint32, error) {
	if tools != "" {
		dst = append(dst, TokenTools)
		dst = Tokenize(dst, tools)
		dst = append(dst, TokenEnd)
	}
	for _, m := range msgs {
		var marker uint32
		switch m.Role {
		case "system", "developer":
			marker = TokenSystem
		case "user":
			marker = TokenUser
		case "assistant":
			marker = TokenAssistant
		case "tool", "function":
			marker = TokenTool
		default:
			return dst, errors.Join(ErrUnknownRole, errors.New("role "+strconv.Quote(m.Role)))
		}
		dst = append(dst, marker)
		dst = Tokenize(dst, m.Content)
		dst = append(dst, TokenEnd)
	}
	if addGenerationPrompt {
		dst = append(dst, TokenAssistant)
	}
	return dst, nil
}

// generatedToken returns output token k of a request whose prompt fingerprint is
// seed: a word of genWords picked by splitmix64, so outputs are deterministic.
func generatedToken(seed uint64, k int) uint32 {
	x := seed + uint64(k+1)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return genIDs[x%uint64(len(genIDs))]
}

// promptSeed fingerprints a prompt (FNV-1a-64 over the little-endian token IDs)
// to seed its generated tokens.
func promptSeed(tokens []uint32) uint64 {
	h := uint64(14695981039346656037)
	for _, t := range tokens {
		for s := 0; s < 32; s += 8 {
			h ^= uint64(byte(t >> s))
			h *= 1099511628211
		}
	}
	return h
}
