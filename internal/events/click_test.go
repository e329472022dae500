package events

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Click and ClickFields describe the same fields in the same order, and Field points to each:
// a field added to one of them alone fails here.
func TestClickFieldsDescribeClick(t *testing.T) {
	typ := reflect.TypeFor[Click]()
	if typ.NumField() != int(NumClickFields) {
		t.Fatalf("Click has %d fields, ClickFields %d", typ.NumField(), NumClickFields)
	}
	kinds := map[FieldKind]reflect.Type{KindString: reflect.TypeFor[string](), KindTime: reflect.TypeFor[time.Time](),
		KindBool: reflect.TypeFor[bool]()}
	jsonNames, columns := map[string]bool{}, map[string]bool{}
	for f, spec := range ClickFields {
		sf := typ.Field(f)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name != spec.JSON || (opts == "omitempty") != spec.OmitEmpty || sf.Type != kinds[spec.Kind] {
			t.Errorf("field %d: Click.%s %s `json:%q`, ClickFields has %+v", f, sf.Name, sf.Type, sf.Tag.Get("json"), spec)
		}
		if spec.Kind == KindTime && spec.OmitEmpty {
			t.Errorf("field %d (%s): encoding/json never leaves out a time, omitempty or not", f, spec.JSON)
		}
		if jsonNames[spec.JSON] || spec.Column != "" && columns[spec.Column] {
			t.Errorf("field %d: %+v repeats a name", f, spec)
		}
		jsonNames[spec.JSON], columns[spec.Column] = true, true

		// Field(f) points to the struct field f: what is set through it is set there.
		c := MarkedClick(ClickField(f))
		if got := reflect.ValueOf(c).Field(f); got.IsZero() || !reflect.ValueOf(c.Field(ClickField(f))).Elem().Equal(got) {
			t.Errorf("field %d (%s): Field does not point to Click.%s", f, spec.JSON, sf.Name)
		}
		if reflect.ValueOf(&c).Elem().Field(f).SetZero(); c != (Click{}) {
			t.Errorf("field %d (%s) set alone sets others too: %+v", f, spec.JSON, c)
		}
	}
}
