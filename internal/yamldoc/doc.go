// Package yamldoc reads a configuration file written in YAML (or JSON, a
// subset of YAML) as JSON, for kvroute's strict JSON decoding (jsonconf) to
// read unchanged, and refuses a file of more than one YAML document.
//
// sigs.k8s.io/yaml's YAMLToJSONStrict reads a stream's first document and
// drops the rest unread, so that the settings after a "---" (an unknown key,
// a malformed value, a whole section) would be ignored without a word.
// ToJSON refuses such a stream instead, as every kvroute command does for
// every configuration file it reads. Empty documents (a leading or trailing
// "---") do not count. A key given twice in one mapping is an error
// (YAMLToJSONStrict), not the last one silently winning.
package yamldoc
