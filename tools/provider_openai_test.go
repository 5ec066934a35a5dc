package tools_test

import (
	"strings"
	"testing"
)

func TestOpenAIRenderingsMatchGolden(t *testing.T) {
	reg := builtinRegistry(t)
	var fns []map[string]any
	for _, tool := range reg.Tools() {
		fns = append(fns, tool.OpenAIFunction())
	}
	checkGolden(t, "openai_functions.golden.json", fns)
}

func TestOpenAIFunctionShape(t *testing.T) {
	reg := builtinRegistry(t)
	tool, _ := reg.Lookup("kb_search")
	f := tool.OpenAIFunction()
	if f["type"] != "function" {
		t.Errorf("type = %v", f["type"])
	}
	fn := f["function"].(map[string]any)
	if fn["name"] != "kb_search" || !strings.HasPrefix(fn["description"].(string), "Search the company knowledge base") {
		t.Errorf("name/description = %v / %v", fn["name"], fn["description"])
	}
	if fn["strict"] != false {
		t.Errorf("strict = %v, want false (kb_search has an optional argument)", fn["strict"])
	}
	params := fn["parameters"].(map[string]any)
	if _, ok := params["$schema"]; ok {
		t.Error("parameters still carry $schema")
	}
	if params["type"] != "object" || params["properties"].(map[string]any)["limit"] == nil {
		t.Errorf("parameters = %v", params)
	}
	params["type"] = "array"
	again := tool.OpenAIFunction()["function"].(map[string]any)["parameters"].(map[string]any)
	if again["type"] != "object" {
		t.Error("changing one rendering changed the next")
	}
}
