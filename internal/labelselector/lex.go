package labelselector

// selTok is the kind of a selector token.
type selTok uint8

const (
	tokEnd   selTok = iota // end of the selector
	tokIdent               // a key, a value, or a word
	tokComma               // ,
	tokOpen                // (
	tokClose               // )
	tokNot                 // !
	tokEq                  // =
	tokEqEq                // ==
	tokNotEq               // !=
	tokGt                  // >
	tokLt                  // <
	tokIn                  // the word in
	tokNotIn               // the word notin
)

type selToken struct {
	kind selTok
	text string
	pos  int
}

func isSelSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isSelSymbol(c byte) bool {
	switch c {
	case '=', '!', '(', ')', ',', '>', '<':
		return true
	}
	return false
}

var selSymbols = map[string]selTok{
	",": tokComma, "(": tokOpen, ")": tokClose, "!": tokNot, "=": tokEq,
	"==": tokEqEq, "!=": tokNotEq, ">": tokGt, "<": tokLt,
}

// lexSelector splits text into tokens, ending with tokEnd. A word is a run of
// bytes that are neither blanks nor symbols; "!=" and "==" are the only
// two-byte symbols. A NUL byte behaves as in Kubernetes' lexer, which reads
// it as the end of input: it ends the token it follows (and is skipped), and
// where a token would start it ends the selector.
func lexSelector(text string) []selToken {
	var toks []selToken
	i := 0
	for {
		for i < len(text) && isSelSpace(text[i]) {
			i++
		}
		if i >= len(text) || text[i] == 0 {
			return append(toks, selToken{kind: tokEnd, pos: i})
		}
		start := i
		if isSelSymbol(text[i]) {
			i++
			if (text[start] == '!' || text[start] == '=') && i < len(text) && text[i] == '=' {
				i++
			}
			toks = append(toks, selToken{kind: selSymbols[text[start:i]], text: text[start:i], pos: start})
		} else {
			for i < len(text) && text[i] != 0 && !isSelSpace(text[i]) && !isSelSymbol(text[i]) {
				i++
			}
			t := selToken{kind: tokIdent, text: text[start:i], pos: start}
			switch t.text {
			case "in":
				t.kind = tokIn
			case "notin":
				t.kind = tokNotIn
			}
			toks = append(toks, t)
		}
		if i < len(text) && text[i] == 0 {
			i++
		}
	}
}
