package labelselector

import (
	"fmt"
	"slices"
	"strings"
)

// CheckLabels reports the first of labels, in key order, that Kubernetes
// would refuse on a pod: a key that is not [prefix "/"] name, or a value
// that is not empty or a name of at most 63 bytes. Labels kvroute reads
// from a file are held to it, so that an endpoint's labels are ones a
// selector can name and a pod could carry.
func CheckLabels(labels map[string]string) error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if msg := labelKeyProblem(k); msg != "" {
			return fmt.Errorf("label key %q %s", k, msg)
		}
		if msg := labelValueProblem(labels[k]); msg != "" {
			return fmt.Errorf("label %s: value %q %s", k, labels[k], msg)
		}
	}
	return nil
}

// labelKeyProblem says why k is not a Kubernetes label key ("" when it is):
// [prefix "/"] name, the prefix a lower-case DNS-1123 subdomain of at most 253
// bytes, the name a label name.
func labelKeyProblem(k string) string {
	name := k
	if strings.Count(k, "/") > 1 {
		return "has more than one '/'"
	}
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		name = n
		switch {
		case prefix == "":
			return "has an empty prefix"
		case len(prefix) > 253:
			return "prefix is longer than 253 bytes"
		case !isDNSSubdomain(prefix):
			return "prefix is not a lower-case DNS subdomain"
		}
	}
	switch {
	case name == "":
		return "has an empty name"
	case len(name) > 63:
		return "name is longer than 63 bytes"
	case !isLabelName(name):
		return "name must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

// labelValueProblem says why v is not a Kubernetes label value ("" when it
// is): empty, or a label name of at most 63 bytes.
func labelValueProblem(v string) string {
	switch {
	case len(v) > 63:
		return "is longer than 63 bytes"
	case v != "" && !isLabelName(v):
		return "must be empty or letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isLabelName reports whether s matches ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9].
func isLabelName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is dot-separated DNS-1123 labels: each
// non-empty, lower-case letters, digits and '-', starting and ending with a
// letter or digit (the length bound is the caller's).
func isDNSSubdomain(s string) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			continue
		}
		l := s[start:i]
		if l == "" || !isLowerAlnum(l[0]) || !isLowerAlnum(l[len(l)-1]) {
			return false
		}
		for j := 1; j < len(l)-1; j++ {
			if !isLowerAlnum(l[j]) && l[j] != '-' {
				return false
			}
		}
		start = i + 1
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
