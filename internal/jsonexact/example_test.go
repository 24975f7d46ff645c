package jsonexact_test

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonexact"
)

// Unmarshal reads a chat body as vLLM does: "Model" is not the model
// member, and of the two "messages" members only the last counts, where
// encoding/json would take "Model" and keep the first list's role.
func ExampleUnmarshal() {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var body struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
	}
	in := `{"model":"llama","Model":"shadow","messages":[{"role":"system","content":"a"}],"messages":[{"content":"b"}]}`
	if err := jsonexact.Unmarshal([]byte(in), &body); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %+v\n", body.Model, body.Messages)
	// Output: llama [{Role: Content:b}]
}
