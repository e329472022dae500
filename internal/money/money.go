// Package money handles amounts exactly: integer minor units in storage and code, decimal
// strings in JSON ("42.50"), always beside an ISO 4217 currency whose exponent says how many
// minor units a major unit has (2 for EUR, 0 for JPY, 3 for KWD). Never a float.
package money

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// exponents of the ISO 4217 currencies that are not 2-decimal.
var exponents = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// currencies are the active ISO 4217 codes.
var currencies = strings.Fields(`AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD BTN
BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS
GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR
LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR
PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD
TZS UAH UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWG`)

var known = func() map[string]bool {
	m := make(map[string]bool, len(currencies))
	for _, c := range currencies {
		m[c] = true
	}
	return m
}()

// Errors of parsing.
var (
	ErrCurrency = errors.New("not an ISO 4217 currency code")
	ErrAmount   = errors.New("not a decimal amount")
)

// Currencies are the active ISO 4217 codes, sorted: the choices of a form's currency list.
func Currencies() []string { return append([]string(nil), currencies...) }

// ValidCurrency reports whether code is an active ISO 4217 currency (upper case).
func ValidCurrency(code string) bool { return known[code] }

// Exponent is the number of decimals of the currency.
func Exponent(currency string) int {
	if e, ok := exponents[currency]; ok {
		return e
	}
	return 2
}

// Parse reads a non-negative decimal string ("42.5", "42.50", "1000") into minor units of the
// currency. More decimals than the currency has is an error, never a rounding.
func Parse(s, currency string) (int64, error) {
	if !known[currency] {
		return 0, fmt.Errorf("%q: %w", currency, ErrCurrency)
	}
	exp := Exponent(currency)
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") || !digits(whole) || !digits(frac) || len(whole) > 15 {
		return 0, fmt.Errorf("%q: %w", s, ErrAmount)
	}
	if len(frac) > exp {
		return 0, fmt.Errorf("%q has more than %d decimals for %s: %w", s, exp, currency, ErrAmount)
	}
	frac += strings.Repeat("0", exp-len(frac))
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, ErrAmount)
	}
	return v, nil
}

// Format writes minor units as a decimal string with the currency's decimals.
func Format(minor int64, currency string) string {
	sign := ""
	u := uint64(minor)
	if minor < 0 {
		sign, u = "-", uint64(-minor)
		if minor == math.MinInt64 {
			u = uint64(math.MaxInt64) + 1
		}
	}
	return decimal(sign, strconv.FormatUint(u, 10), Exponent(currency))
}

// decimal places the point exp digits from the right of the minor units' digits.
func decimal(sign, digits string, exp int) string {
	if exp == 0 {
		return sign + digits
	}
	if len(digits) <= exp {
		digits = strings.Repeat("0", exp-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-exp] + "." + digits[len(digits)-exp:]
}

// Percent returns bps basis points (1250 = 12.50 %) of an amount in minor units, rounded half
// up to the minor unit.
func Percent(minor, bps int64) int64 {
	return (minor*bps + 5000) / 10000
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
