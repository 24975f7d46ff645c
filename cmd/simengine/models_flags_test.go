package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExtraModelsFlag(t *testing.T) {
	o, err := parseFlags([]string{"--model", "a", "--extra-models", "b,c"})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, o.cfg.ExtraModels)
	o, err = parseFlags(nil)
	require.NoError(t, err)
	require.Nil(t, o.cfg.ExtraModels)
}
